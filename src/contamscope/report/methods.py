"""Which report module handles which run: dispatch on summary.json's schema (or method).

A method plugs in by adding one module with:

* ``TITLE``: a short name for headings (``"Option-permutation test"``);
* ``sections(run, options) -> list[Section]``: its part of the HTML report;
* ``estimate(run) -> Estimate | None``: its leaderboard cell (its leakage estimate with a CI,
  and a legend saying how to read it), and ``UNRANKED``: why a run may have none (said when
  the leaderboard leaves it out);
* optionally ``leaderboard_figures(runs, labels) -> list[str]``: figures over all its runs in a
  leaderboard (CAP: the PCR heatmap), ``labels`` being each run's (model, benchmark) as the
  board's cells name them;

and one line in :data:`METHOD_MODULES`. Modules are imported only when a run needs them. A
contamscope run without a module gets :mod:`contamscope.report.generic`: its statistics and item
fields as tables.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType

from ..errors import ConfigError
from .rundata import RunData, refuse_newer

__all__ = ["Estimate", "ReportOptions", "METHOD_MODULES", "method_module", "unranked_reason"]

METHOD_MODULES: dict[str, str] = {
    "contamscope.permutation.summary": "contamscope.report.permutation",
    "contamscope.cap.summary": "contamscope.report.cap",
    "contamscope.benbench.summary": "contamscope.report.benbench",
    "contamscope.membership.summary": "contamscope.report.membership",
}
"""Summary schema (without its ``/version``) -> report module."""

GENERIC_MODULE = "contamscope.report.generic"
"""Fallback for contamscope runs whose method has no module here yet: their statistics and
per-item fields as stored, no figures, no leaderboard cell."""

_BY_METHOD = {key.split(".")[1]: mod for key, mod in METHOD_MODULES.items()}


@dataclass(frozen=True)
class ReportOptions:
    """What to put in a report."""

    top_cases: int = 8
    """Case-study plots for this many of the most suspicious items."""
    page_size: int = 50
    """Rows per page of the per-item table."""
    labels: dict[str, bool] | None = None
    """Ground-truth leak labels by item id (validation runs): adds ROC and precision-recall."""


@dataclass(frozen=True)
class Estimate:
    """One leaderboard cell: how much leakage a run shows, beyond what chance gives."""

    statistic: str
    """What the number is, e.g. 'Algorithm-1 excess over chance'."""
    value: float | None
    """The estimate (a fraction: 0.05 = 5 percentage points)."""
    ci: tuple[float, float] | None
    """Its 95% confidence interval."""
    p_value: float | None
    """p-value under the method's null hypothesis (no leakage); one-sided unless ``legend``
    says otherwise."""
    n_items: int
    """Items the estimate is based on."""
    raw: dict[str, float | None] = field(default_factory=dict)
    """Secondary numbers shown next to it (raw rate, chance level)."""
    percent: bool = True
    """True: ``value`` is a fraction shown in percentage points; False: shown as a number."""
    leak_sign: int = 1
    """+1: larger values mean more leakage; -1: smaller ones do (CAP's PCR_train - PCR_test)."""
    legend: str = ""
    """How to read the cell (direction, H0, sidedness of the p-value); shown under the
    leaderboard so cells of different methods are not read as the same number."""
    flagged: tuple[str, ...] = ()
    """Parts of the benchmark flagged on their own, most significant first (a permutation
    run's subjects at Benjamini-Hochberg q <= 0.05); named under the leaderboard, since a leak
    of a few subjects can stay below the whole run's estimate."""
    n_parts: int | None = None
    """How many parts were tested on their own (None: the run tests no parts)."""
    n_untestable: int = 0
    """Of those, how many have too few items to be flagged whatever the model did (their
    smallest reachable p-value is above the level)."""
    caveat: str = ""
    """Why this cell's benchmark may show leakage without any (said under the leaderboard once
    per benchmark): a permutation run's benchmark whose options follow writers' conventions."""
    settings: dict[str, str] = field(default_factory=dict)
    """The run's analysis settings the cell depends on (a permutation run's Algorithm-1
    ``ties``), so the board can say where runs differ."""
    warning: str = ""
    """Why this one run's number may mislead, said under the leaderboard with its model and
    benchmark (a membership run whose references are not written like the benchmark items)."""

    def text(self) -> str:
        """``+3.2 pp [+1.1, +5.4]`` (or plain numbers when not a percentage)."""
        if self.value is None:
            return "n/a"

        def f(x: float) -> str:
            if self.percent:
                return f"{100 * x:+.1f}"
            return f"{x:+.3f}" if abs(x) < 100 else f"{x:+.4g}"  # one precision per column

        unit = " pp" if self.percent else ""
        ci = f" [{f(self.ci[0])}, {f(self.ci[1])}]" if self.ci else ""
        return f"{f(self.value)}{unit}{ci}"


def method_module(run: RunData) -> ModuleType:
    """The report module for ``run``; a clear error for a run of an unknown kind."""
    refuse_newer(run, "report")
    schema = run.schema.partition("/")[0]
    name = METHOD_MODULES.get(schema) or _BY_METHOD.get(run.method)
    if name is None and schema.startswith("contamscope.") and schema.endswith(".summary"):
        name = GENERIC_MODULE  # a contamscope method without its own section module yet
    if name is None:
        known = ", ".join(sorted(METHOD_MODULES))
        raise ConfigError(
            f"{run.path}: no report for runs of schema {run.schema or '?'!r} "
            f"(method {run.method or '?'!r}); known: {known}"
        )
    return importlib.import_module(name)


def unranked_reason(module: ModuleType, run: RunData) -> str:
    """Why ``run`` has no leaderboard cell, as its method's module says it."""
    if hasattr(module, "why_unranked"):
        return str(module.why_unranked(run))
    return str(getattr(module, "UNRANKED", "no statistic to rank"))
