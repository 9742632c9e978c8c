"""Matplotlib figures rendered to inline SVG (no files, no network, Agg backend).

Colours come from the Okabe-Ito palette, which stays distinguishable under the common forms of
colour blindness; the highlighted series also differs in marker shape and size, not colour alone.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import ConfigError

__all__ = [
    "OKABE_ITO",
    "HIGHLIGHT",
    "BASE",
    "figure",
    "to_svg",
    "require_matplotlib",
    "text_colour",
    "legend_outside",
    "difference_bins",
    "unique_ids",
]

OKABE_ITO = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#F0E442",  # yellow
    "#000000",
)
BASE = "#0072B2"
"""Colour of ordinary data (blue)."""
HIGHLIGHT = "#D55E00"
"""Colour of the thing to look at (vermillion): the original order, H0's expectation."""


def require_matplotlib() -> Any:
    """Import matplotlib with the Agg backend, or say which extra installs it."""
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("reports need matplotlib: pip install 'contamscope[report]'") from None
    from cycler import cycler

    matplotlib.use("Agg", force=True)
    matplotlib.rcParams.update(
        {
            "svg.fonttype": "none",  # text stays text: smaller files, selectable labels
            "svg.hashsalt": "contamscope",  # deterministic ids
            "font.size": 10,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.prop_cycle": cycler(color=list(OKABE_ITO)),
            # absolute tick values: log-probs near -411 read "-411.2", not "-0.035" + "-4.112e2"
            "axes.formatter.useoffset": False,
        }
    )
    return matplotlib


@contextmanager
def figure(width: float = 6.4, height: float = 3.6, **kw: Any) -> Iterator[Any]:
    """A fresh (fig, ax) pair; always closed afterwards."""
    require_matplotlib()
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(width, height), **kw)
    try:
        yield fig, ax
    finally:
        plt.close(fig)


def text_colour(image: Any, value: float) -> str:
    """Black or white, whichever reads on ``image``'s colour for ``value`` (a heatmap cell):
    black on light colours (viridis' yellow end), white on dark ones."""
    r, g, b, _ = image.cmap(image.norm(value))
    return "#000" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.45 else "#fff"


def difference_bins(values: list[float]) -> int | list[float]:
    """Histogram bins of paired differences: about one per 10 values (10 to 60), or, where
    every value is the same, one bin centred on it (numpy's bins put an all-zero set in the
    bar from 0 to 0.1, which read as B ahead; HTML QA).

    >>> difference_bins([0.0, 0.0]), difference_bins([0.0, 1.0])
    ([-0.005, 0.005], 10)
    """
    low, high = min(values), max(values)
    if low == high:
        half = max(abs(low) * 0.05, 0.005)
        return [low - half, low + half]
    return min(60, max(10, len(values) // 10))


def legend_outside(ax: Any) -> None:
    """The legend to the right of the axes, where it cannot hide data (to_svg's tight layout
    makes room for it)."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def legend_below(ax: Any) -> None:
    """The legend under the axes (below the x label), where it cannot hide a curve: a figure
    whose curves fill every corner (precision-recall steps at precision 1)."""
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), borderaxespad=0.0)


_SVG_HEAD = re.compile(r"^.*?(<svg\b)", re.S)


def to_svg(fig: Any, title: str) -> str:
    """The figure as an inline ``<svg>`` element with an accessible title. Its text stays text
    (the browser draws it in its own fonts), so matplotlib's warning that its font lacks a
    glyph (each Chinese subject name's) is not shown: it said nothing about the page (QA)."""
    import warnings

    buf = io.StringIO()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        fig.tight_layout()
        # "tight": the canvas takes in every artist (a legend beside the axes, a long axis
        # label under them), which tight_layout alone left cut at the edge
        fig.savefig(
            buf, format="svg", bbox_inches="tight", pad_inches=0.05,
            metadata={"Date": None, "Creator": None},
        )  # fmt: skip
    svg = _SVG_HEAD.sub(r"\1", buf.getvalue(), count=1)  # drop the XML prolog and doctype
    svg = unique_ids(svg)
    svg = svg.replace("<svg ", '<svg role="img" class="fig" ', 1)
    from html import escape

    return svg.replace(">", f"><title>{escape(title)}</title>", 1)


_ID = re.compile(r'\sid="([^"]+)"')
_REF = re.compile(r'(url\(#|href="#)([^)"]+)')


def unique_ids(svg: str) -> str:
    """``svg`` with the ids that something refers to (``url(#...)``, ``xlink:href="#..."``:
    markers, clip paths) prefixed by a hash of the figure, and the others made classes (names
    that may repeat: ``legend_1``, ``patch_3``): matplotlib names elements alike in every
    figure, so a page of figures repeated ids (131 in one report; HTML QA), and a reference
    could find another figure's element. The hash keeps the output the same from run to run.

    >>> unique_ids('<g id="figure_1"><path id="m1"/><use xlink:href="#m1"/></g>')
    '<g class="figure_1"><path id="ff9d33aeb-m1"/><use xlink:href="#ff9d33aeb-m1"/></g>'
    """
    prefix = "f" + hashlib.sha256(svg.encode("utf-8")).hexdigest()[:8] + "-"
    used = {m.group(2) for m in _REF.finditer(svg)}
    svg = _ID.sub(
        lambda m: f' id="{prefix}{m.group(1)}"' if m.group(1) in used else f' class="{m.group(1)}"',
        svg,
    )
    return _REF.sub(lambda m: f"{m.group(1)}{prefix}{m.group(2)}", svg)
