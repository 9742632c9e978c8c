"""The reference-calibrated membership test, end to end: benchmark and reference items ->
original text -> per-token statistics (one teacher-forced pass per text, through the score
cache) -> familiarity statistics -> conformal p-values, flags and the dataset-level test.

Each item's text is the permutation template's original-order text (prefix + continuation,
exactly as the permutation pipeline writes them), scored as one text from the model's BOS
token. Records of both sets are appended to the run folder after each batch (resume); once every
item is done the p-values and flags are computed from the stored records and ``items.jsonl`` is
rewritten with them. What is scored (model, data, template, k) is the run's settings; what is
only analysis (statistic, alpha, FDR, bootstrap) may change on a re-run of the same folder,
which then scores nothing and re-analyses.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from .. import __version__
from ..backends.base import Backend, ScoreRequest
from ..backends.probe import check_backend
from ..data.items import LoadResult, MCQItem, content_key, item_place
from ..detectors.combined import COMBINED_COMPONENTS, COMBINED_NULL, CombinedTest
from ..detectors.membership import (
    DATASET_NULL,
    ITEM_NULL,
    STATISTICS,
    MembershipResult,
    MembershipTest,
    item_statistics,
    mann_whitney,
)
from ..detectors.permutation import gap
from ..errors import ConfigError, StoreError
from ..perturb import TEMPLATES, PromptTemplate, get_template, option_orders
from ..perturb.templates import TemplateField
from ..store import (
    RUN_SCHEMA_VERSION,
    CachedScorer,
    RunDir,
    RunFolder,
    as_run_dir,
    releases_run_dir,
)
from .inputs import check_field_types, check_from, check_items
from .outcome import Outcome, printed_verdict
from .provenance import (
    git_commit,
    notes_entry,
    package_versions,
    recorded_source,
    selection_settings,
)
from .served import refuse_changed_server

__all__ = [
    "Statistic",
    "unseen_references",
    "distinct_references",
    "MembershipConfig",
    "MembershipOutcome",
    "item_request",
    "reanalyse_membership",
    "run_membership",
    "SCHEMA",
    "ALL_STATISTICS",
    "ORDER_STATISTICS",
]

SCHEMA = "contamscope.membership.summary/1"
ROLES = ("benchmark", "reference")
ORDER_STATISTICS = ("gap", "combined")
"""Statistics that need every option order scored too: the permutation gap (the original
order's log-prob minus the other orders' mean) and the combined test (gap + Min-K%++)."""
ALL_STATISTICS = (*STATISTICS, *ORDER_STATISTICS)
Statistic = Literal["min_k_pp", "min_k", "loss", "zlib", "gap", "combined"]
"""A name of :data:`ALL_STATISTICS` (the config's ``statistic``, for a type checker)."""


@dataclass(frozen=True)
class MembershipConfig:
    """Settings of a membership run."""

    statistic: Statistic = "min_k_pp"
    """Familiarity statistic tested: min_k_pp, min_k, loss, zlib (all four are recorded), gap or
    combined (these two also score every option order; gap is then recorded too)."""
    k: float = 0.2
    """Fraction of lowest-scoring tokens averaged by Min-K% and Min-K%++."""
    alpha: float = 0.05
    """Per-item level: flags have false-positive rate <= alpha (FDR with ``fdr``)."""
    fdr: bool = False
    """Flag by Benjamini-Hochberg q-values (false-discovery rate) instead of p-values."""
    template: TemplateField[PromptTemplate] = TemplateField(TEMPLATES["paper"])
    """How an item becomes text (the permutation template, original option order); a
    :class:`~contamscope.perturb.PromptTemplate` or a name (``paper``, ``mmlu``)."""
    n_boot: int = 2000
    """Bootstrap resamples of the AUC's confidence interval."""
    seed: int = 0
    """Seed of the bootstrap (and of ``--sample``)."""
    batch_items: int = 32
    """Items per scoring batch (results are saved after each)."""
    keep_orders: bool = False
    """Score every option order even though the statistic does not need them (set when a run
    folder already holds them, so that its records stay alike)."""

    def __post_init__(self) -> None:
        check_field_types(self, {"n_boot": "--bootstrap"})
        if self.statistic not in ALL_STATISTICS:
            raise ConfigError(
                f"--statistic {self.statistic!r}: expected one of {', '.join(ALL_STATISTICS)}"
            )
        if not 0 < self.k <= 1:
            raise ConfigError(f"--k {self.k}: expected a fraction in (0, 1]")
        if self.batch_items < 1:
            raise ConfigError("--batch-items must be at least 1")
        MembershipTest(alpha=self.alpha, fdr=self.fdr, n_boot=self.n_boot, seed=self.seed)

    @property
    def orders(self) -> bool:
        """Whether every option order is scored too (``gap``, ``combined``)."""
        return self.statistic in ORDER_STATISTICS or self.keep_orders

    @property
    def components(self) -> tuple[str, ...]:
        """The statistics the declared test reads from each record."""
        return COMBINED_COMPONENTS if self.statistic == "combined" else (self.statistic,)

    @property
    def needs_vocab(self) -> bool:
        """Whether the declared statistic needs the vocabulary mean/std (Min-K%++)."""
        return self.statistic in ("min_k_pp", "combined")

    @property
    def backend_needs(self) -> dict[str, bool]:
        """What the declared statistic needs from a backend (``check_backend``'s arguments):
        per-token log-probs, with ids and the vocabulary mean/std for Min-K%++."""
        vocab = self.needs_vocab
        return {"prompt_logprobs": True, "token_logprobs": True, "token_stats": vocab,
                "vocab_stats": vocab}  # fmt: skip

    def scoring_settings(self) -> dict[str, Any]:
        """What the stored records depend on (a run folder keeps them fixed)."""
        out: dict[str, Any] = {"template": self.template.describe(), "k": self.k}
        if self.orders:
            out["orders"] = "all orders up to 6 options (720), else 719 seeded random ones"
        return out

    def analysis_settings(self) -> dict[str, Any]:
        """What only the analysis depends on (may change between runs of one folder)."""
        return {
            "statistic": self.statistic,
            "alpha": self.alpha,
            "fdr": self.fdr,
            "n_boot": self.n_boot,
            "seed": self.seed,
        }


@dataclass(repr=False)  # Outcome.__repr__: the summary is too long to print
class MembershipOutcome(Outcome):
    """The result of one run (see :class:`~contamscope.pipeline.outcome.Outcome`)."""


def unseen_references(
    benchmark: Sequence[MCQItem], references: Sequence[MCQItem]
) -> tuple[list[MCQItem], list[MCQItem]]:
    """The reference items that are not benchmark items, and those that are (the same
    :func:`~contamscope.data.items.content_key`: question and set of options, whitespace, case,
    width and zero-width characters aside, in any order).

    The test calibrates on the references as items the model never saw; a benchmark item among
    them is one it may have seen, which would hide the very leakage being tested for.

    >>> a = MCQItem("a", "2+2?", ("3", "4"))
    >>> unseen_references([a], [MCQItem("r", " 2+2? ", ("4", "3")), MCQItem("s", "3+3?", ("6", "5"))])[1][0].id
    'r'
    """
    seen = {content_key(it) for it in benchmark}
    kept: list[MCQItem] = []
    dropped: list[MCQItem] = []
    for it in references:
        (dropped if content_key(it) in seen else kept).append(it)
    return kept, dropped


def distinct_references(references: Sequence[MCQItem]) -> tuple[list[MCQItem], list[MCQItem]]:
    """The reference items once each, and the repeats of an earlier one (the same question and
    set of options, as :func:`~contamscope.data.items.content_key` compares them).

    The conformal p-value counts each reference as one more unseen item: a reference given 20
    times counts 20 times, and the flag rate is no longer bounded by alpha (helper audit: two
    references repeated 20 times flagged 12 of 30 clean items at a stated rate of 0.05).

    >>> r = MCQItem("r", "2+2?", ("3", "4"))
    >>> [x.id for x in distinct_references([r, MCQItem("s", " 2+2? ", ("4", "3")), r])[1]]
    ['s', 'r']
    """
    seen: set[Any] = set()
    kept: list[MCQItem] = []
    repeats: list[MCQItem] = []
    for it in references:
        key = content_key(it)
        (repeats if key in seen else kept).append(it)
        seen.add(key)
    return kept, repeats


def item_request(item: MCQItem, template: PromptTemplate) -> ScoreRequest:
    """The item's original text, prefix + continuation in the published option order, scored
    as one text (empty prefix: every token, from the BOS token on)."""
    order = tuple(range(item.n_options))
    return ScoreRequest("", template.prefix(item) + template.continuation(item, order))


def _same_served_model_as_before(
    backend: Backend,
    wanted: Iterable[tuple[str, MCQItem]],
    done: dict[str, dict[str, Any]],
    template: PromptTemplate,
    run_dir: RunDir,
) -> None:
    """Refuse to resume a run of a served model (``openai:``) whose server now scores the first
    scored item's text otherwise than the run recorded its mean log-prob (:mod:`.served`)."""
    for role, it in wanted:
        rec = done.get(f"{role}/{it.id}")
        if rec is not None and rec.get("statistics") and rec["statistics"].get("loss") is not None:
            n = rec["n_tokens"]
            summed = rec["statistics"]["loss"] * n
            req = item_request(it, template)
            refuse_changed_server(backend, run_dir, rec["id"], [req], [summed], [n], per_token=True)
            return


def _record(role: str, item: MCQItem, req: ScoreRequest, st: Any, k: float) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "id": f"{role}/{item.id}",
        "item_id": item.id,
        "role": role,
        "subject": item.subject,
        "source": item.source,
        "line": item.line,
        "n_options": item.n_options,
        "n_chars": len(req.continuation),
        # a text too long for the model whose count is not known comes back as one unknown
        # token: a served model's, or one a local model found far past its context without
        # tokenising it to its end (it read 1 token; QA)
        "n_tokens": None if st.is_too_long and tuple(st.tokens) == (-1,) else len(st.tokens),
        "excluded": None,
    }
    why = (
        "no tokens"
        if not st.tokens
        else "longer than the model's context window"
        if st.is_too_long
        else st.non_finite()
    )  # a -inf made every statistic None with no reason, and any NaN read as too long
    if why is not None:
        rec["excluded"] = why
        rec["statistics"] = None
        return rec
    rec["statistics"] = item_statistics(
        st.logprobs,
        req.continuation,
        mean_logprob=st.mean_logprob,
        std_logprob=st.std_logprob,
        k=k,
    )
    return rec


LIKENESS_LEVEL = 0.05
"""Family-wise level of :func:`reference_likeness` (Bonferroni over its rows)."""


def reference_likeness(items: Sequence[MCQItem], references: Sequence[MCQItem]) -> dict[str, Any]:
    """Are the reference items written like the benchmark items, in what their option orders
    show? Per feature, the share of each set that has it and a two-sided Fisher exact test of
    H0: the two sets have it at the same rate; rows are compared at :data:`LIKENESS_LEVEL`
    over their number (Bonferroni). Features: options that refer to each other, a natural
    published order (:func:`natural_order_reason`), and per writers' convention
    (:data:`~contamscope.perturb.exchangeability.CONVENTIONS`) the share of the items with its
    structure that are published in it. No model is involved.

    The membership test's false-positive rate holds when references are drawn like the
    benchmark items; the combined statistic reads the option-order gap, which a natural order
    moves without a leak, so references ordered less conventionally than the benchmark make it
    flag clean items. A row that differs says so; none differing is weak evidence with few
    references.

    >>> from contamscope.data import MCQItem
    >>> bench = [MCQItem(f"b{i}", "q", ("1", "2", "3", "4")) for i in range(40)]
    >>> refs = [MCQItem(f"r{i}", "q", ("3", "1", "4", "2")) for i in range(40)]
    >>> check = reference_likeness(bench, refs)
    >>> check["alike"], check["rows"][1]["feature"], check["rows"][1]["benchmark"]["rate"]
    (False, 'natural option order', 1.0)
    """
    from scipy.stats import fisher_exact

    from ..perturb.exchangeability import (
        CONVENTIONS,
        conventions_of,
        natural_order_reason,
        non_exchangeable_reason,
    )

    def shares(group: Sequence[MCQItem]) -> dict[str, tuple[int, int]]:
        counts: dict[str, list[int]] = {"options refer to each other": [0, len(group)]}
        counts["natural option order"] = [0, 0]
        for name in CONVENTIONS:
            counts[f"published in {name} order" if name == "alphabetical" else name] = [0, 0]
        for it in group:
            if non_exchangeable_reason(it.options) is not None:
                counts["options refer to each other"][0] += 1
                continue
            counts["natural option order"][1] += 1
            counts["natural option order"][0] += natural_order_reason(it.options) is not None
            identity = tuple(range(it.n_options))
            for name, orders in conventions_of(it.options).items():
                key = f"published in {name} order" if name == "alphabetical" else name
                counts[key][1] += 1
                counts[key][0] += identity in orders
        return {k: (v[0], v[1]) for k, v in counts.items()}

    ours, theirs = shares(items), shares(references)
    for feature, (a, b) in _written_alike(items, references).items():
        ours[feature], theirs[feature] = a, b
    rows: list[dict[str, Any]] = []
    for feature, (k, n) in ours.items():
        kr, nr = theirs[feature]
        if not n or not nr:
            continue
        _, p = fisher_exact([[k, n - k], [kr, nr - kr]], alternative="two-sided")
        rows.append(
            {
                "feature": feature,
                "benchmark": {"count": k, "of": n, "rate": k / n},
                "reference": {"count": kr, "of": nr, "rate": kr / nr},
                "p_value": float(min(1.0, p)),
            }
        )
    level = LIKENESS_LEVEL / max(1, len(rows))
    return {
        "null_hypothesis": "per feature: benchmark and reference items have it at the same rate",
        "level": level,
        "alike": all(r["p_value"] > level for r in rows),
        "rows": rows,
    }


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def _written_alike(
    items: Sequence[MCQItem], references: Sequence[MCQItem]
) -> dict[str, tuple[tuple[int, int], tuple[int, int]]]:
    """Features of how the items are written, as (count, of) for the benchmark and the
    references: written in a CJK script (a third of the characters or more), longer than the
    median length of both sets together (characters of question and options: Mood's median
    test, through :func:`reference_likeness`'s Fisher test), and having the benchmark's most
    common number of options. References in Chinese, five times longer, or with two options
    against four read as "alike" (membership QA): the option-order rows see none of that.

    >>> from contamscope.data import MCQItem
    >>> en = [MCQItem(f"b{i}", "What is the femur?", ("a bone", "a muscle")) for i in range(9)]
    >>> zh = [MCQItem(f"r{i}", "股骨是什么？", ("骨头", "肌肉")) for i in range(9)]
    >>> _written_alike(en, zh)["written in a CJK script"]
    ((0, 9), (9, 9))
    """

    def text(it: MCQItem) -> str:
        return "".join([it.question, *it.options])

    def cjk(it: MCQItem) -> bool:
        chars = "".join(text(it).split())
        return bool(chars) and 3 * len(_CJK.findall(chars)) >= len(chars)

    lengths = sorted(len(text(it)) for it in [*items, *references])
    median = lengths[len(lengths) // 2] if lengths else 0
    counts = Counter(it.n_options for it in items)
    usual = counts.most_common(1)[0][0] if counts else 0

    def count(group: Sequence[MCQItem], has: Any) -> tuple[int, int]:
        return sum(1 for it in group if has(it)), len(group)

    features = {
        "written in a CJK script": cjk,
        "longer than the median of both": lambda it: len(text(it)) > median,
        f"{usual} options": lambda it: it.n_options == usual,
    }
    return {f: (count(items, has), count(references, has)) for f, has in features.items()}


def _order_requests(item: MCQItem, template: PromptTemplate) -> list[ScoreRequest]:
    """The permutation test's requests for ``item``: the original order first."""
    orders = option_orders(item.n_options, key=item.id)
    prefix = template.prefix(item)
    return [ScoreRequest(prefix, template.continuation(item, o)) for o in orders.orders]


def _order_logprobs(
    scorer: CachedScorer, items: Sequence[MCQItem], template: PromptTemplate
) -> tuple[list[list[float]], int]:
    """Each item's log-probs under every option order (the original order first), and the
    continuation tokens of all those orders."""
    per_item = [_order_requests(it, template) for it in items]
    flat = scorer.score([r for reqs in per_item for r in reqs])
    out, start = [], 0
    for reqs in per_item:
        out.append([x.logprob for x in flat[start : start + len(reqs)]])
        start += len(reqs)
    return out, sum(x.n_tokens for x in flat)


def _add_gaps(records: list[dict[str, Any]], results: list[list[float]]) -> None:
    """The permutation gap of each record from its orders' log-probs (in place)."""
    for rec, lps in zip(records, results):
        if rec["statistics"] is None:
            continue
        if len(lps) < 2 or any(math.isnan(x) for x in lps):
            rec["statistics"]["gap"] = None
        else:
            rec["statistics"]["gap"] = gap(lps)


@releases_run_dir
def run_membership(
    benchmark: LoadResult[MCQItem],
    items: Iterable[MCQItem],
    reference: LoadResult[MCQItem],
    reference_items: Iterable[MCQItem],
    scorer: CachedScorer,
    run_dir: RunFolder,
    config: MembershipConfig,
    *,
    selection: dict[str, Any] | None = None,
    overwrite: bool = False,
    on_start: Callable[[int, int], None] | None = None,
    on_items: Callable[[int], None] | None = None,
) -> MembershipOutcome:
    """Score benchmark and reference items, test each benchmark item against the references,
    write records (with p-values and flags) and the summary.

    ``reference_items`` calibrate the test as items the model never saw: one that is also one
    of ``items`` is refused (leave such items out first with :func:`unseen_references`)."""
    run_dir = as_run_dir(run_dir)  # (a path: opened by the decorator; for the type)
    backend = scorer.backend
    counted = scorer.mark()
    method = f"the membership test (--statistic {config.statistic})"
    check_backend(backend, **config.backend_needs, from_start=True, method=method)
    items = check_items(items, object, method, "benchmark items")
    reference_items = check_items(reference_items, object, method, "reference items")
    if not reference_items:
        raise ConfigError(f"--reference {reference.source}: no reference items to calibrate with")
    _, repeats = distinct_references(reference_items)
    _, shared = unseen_references(items, reference_items)
    for found, what, rest in (
        (repeats, ("repeats", "repeat"), "an earlier one (first {}); each counts as another "
         "unseen item, so give each once (distinct_references() leaves the repeats out)"),
        (shared, ("is a tested item", "are tested items"), "too (first {}); the references must "
         "be items the model never saw (unseen_references() leaves them out)"),
    ):  # fmt: skip
        if found:
            first = found[0]
            where = item_place(first)
            raise ConfigError(
                f"--reference {reference.source}: {len(found)} of the {len(reference_items)} "
                f"reference items {what[len(found) > 1]} {rest.format(where)}"
            )
    check_from(items, benchmark, "benchmark items")
    check_from(reference_items, reference, "reference items")
    vocab = backend.capabilities.vocab_stats  # recorded whenever available: one cache kind
    settings: dict[str, Any] = {
        "method": "membership",
        "run_schema": RUN_SCHEMA_VERSION,
        "model": backend.spec,
        "model_fingerprint": scorer.fingerprint,
        "benchmark": recorded_source(benchmark.source),
        "benchmark_hash": benchmark.content_hash,
        "reference": recorded_source(reference.source),
        "reference_hash": reference.content_hash,
        "selection": selection_settings(benchmark, [it.id for it in items], selection),
        "config": config.scoring_settings(),
        "vocab_stats": vocab,
    }
    stored = None if overwrite else run_dir.stored_settings(scorer.renamed)
    if stored is not None and not config.orders and "orders" in stored.get("config", {}):
        # the folder's records carry every order's scores: a statistic that needs none of them
        # re-analyses them, and items still to do are scored alike
        config = replace(config, keep_orders=True)
        settings["config"] = config.scoring_settings()
    # a folder scored without the option orders takes them now (its original texts' scores are
    # kept), and its settings then say so
    scored_without = {k: v for k, v in settings["config"].items() if k != "orders"}
    upgrades = [settings | {"config": scored_without}]
    subjects = settings["selection"].get("subjects")
    if isinstance(subjects, list):  # the CLI stored --subjects as its text before 2026-11-29
        as_text = settings["selection"] | {"subjects": ",".join(subjects)}
        upgrades += [s | {"selection": as_text} for s in (settings, *upgrades)]
    done = run_dir.open(settings, overwrite=overwrite, upgrades=upgrades, renamed=scorer.renamed)
    wanted = [("benchmark", it) for it in items] + [("reference", it) for it in reference_items]
    ids = [f"{role}/{it.id}" for role, it in wanted]
    wanted_ids = set(ids)
    done = {k: v for k, v in done.items() if k in wanted_ids}
    todo = [(role, it) for role, it in wanted if f"{role}/{it.id}" not in done]
    # items scored before without their option orders (a folder first run with another
    # statistic): only the orders are scored, and the records rewritten with their gaps
    gapless = [
        (role, it)
        for role, it in wanted
        if config.orders
        and (rec := done.get(f"{role}/{it.id}")) is not None
        and rec["statistics"] is not None
        and "gap" not in rec["statistics"]
    ]
    if (todo or gapless) and done:
        _same_served_model_as_before(backend, wanted, done, config.template, run_dir)
    if on_start is not None:
        on_start(len(wanted), len(done) - len(gapless))
    t0 = time.perf_counter()
    tokens = 0
    for b in range(0, len(gapless), config.batch_items):
        batch = gapless[b : b + config.batch_items]
        records = [done[f"{role}/{it.id}"] for role, it in batch]
        gaps, order_tokens = _order_logprobs(scorer, [it for _, it in batch], config.template)
        _add_gaps(records, gaps)
        tokens += order_tokens
        run_dir.append(records)  # a record appended again replaces the earlier one on resume
        if on_items is not None:
            on_items(len(batch))
    for b in range(0, len(todo), config.batch_items):
        batch = todo[b : b + config.batch_items]
        reqs = [item_request(it, config.template) for _, it in batch]
        stats = scorer.token_stats(reqs, vocab_stats=vocab)
        records = [
            _record(role, it, req, st, config.k) for (role, it), req, st in zip(batch, reqs, stats)
        ]
        tokens += sum(len(st.tokens) for st in stats)
        if config.orders:
            gaps, order_tokens = _order_logprobs(scorer, [it for _, it in batch], config.template)
            _add_gaps(records, gaps)
            tokens += order_tokens
        run_dir.append(records)
        for r in records:
            done[r["id"]] = r
        if on_items is not None:
            on_items(len(batch))
    elapsed = time.perf_counter() - t0
    computed, reused = scorer.since(counted)
    ordered = [done[i] for i in ids]
    test = analyse(ordered, config)
    run_dir.replace_records(ordered)
    scored_now = len(todo) + len(gapless)
    timing = {
        "scoring_seconds": round(elapsed, 3),
        "items_scored_now": scored_now,
        "items_resumed": len(wanted) - scored_now,
        "items_per_second": round(scored_now / elapsed, 3) if elapsed > 0 and scored_now else None,
        "tokens_scored_now": tokens,
        "requests_computed": computed,
        "requests_from_cache": reused,
    }
    timing = run_dir.with_earlier_timings(timing, scorer.backend.describe())
    summary = build_summary(benchmark, reference, ordered, settings, config, scorer, test, timing)
    summary["reference_check"] = reference_likeness(items, reference_items)
    summary["verdict"] = printed_verdict(summary)
    run_dir.write_summary(summary)
    return MembershipOutcome(summary, run_dir.path, scored_now, len(wanted) - scored_now)


def _usable(rec: dict[str, Any], *statistics: str) -> bool:
    stats = rec["statistics"] or {}
    return not rec.get("excluded") and all(stats.get(s) is not None for s in statistics)


def _describe(records: list[dict[str, Any]], name: str, config: MembershipConfig) -> dict[str, Any]:
    """Means, medians and the dataset-level test of one statistic. Only ``config.statistic`` is
    the run's declared test; the others are shown for exploration (not multiplicity-corrected)."""
    vals = {
        role: [r["statistics"][name] for r in records if r["role"] == role and _usable(r, name)]
        for role in ROLES
    }
    out: dict[str, Any] = {"declared": name == config.statistic}
    for role, v in vals.items():
        out[f"{role}_n"] = len(v)
        out[f"{role}_mean"] = float(np.mean(v)) if v else None
        out[f"{role}_median"] = float(np.median(v)) if v else None
    if vals["benchmark"] and vals["reference"]:
        t = mann_whitney(
            vals["benchmark"], vals["reference"], n_boot=config.n_boot, seed=config.seed
        )
        out.update(auc=t.auc, auc_ci=list(t.auc_ci) if t.auc_ci else None, p_value=t.p_value)
    return out


def _why_none(records: list[dict[str, Any]]) -> str:
    """Why none of ``records`` has the statistic: each exclusion reason with its count (it said
    "too long or empty" of log-probs that were NaN; integrator QA).

    >>> _why_none([{"excluded": "no tokens"}, {"excluded": "no tokens"}, {"excluded": None}])
    'all 3 excluded: no tokens (2); the statistic missing (1)'
    """
    counts = Counter(r.get("excluded") or "the statistic missing" for r in records)
    reasons = "; ".join(f"{why} ({n})" for why, n in counts.most_common())
    return f"all {len(records)} excluded: {reasons}"


def analyse(records: list[dict[str, Any]], config: MembershipConfig) -> dict[str, Any]:
    """p-values, q-values and flags into the benchmark records (in place); the test as a dict.

    Records whose statistic is missing (excluded items) get ``p_value`` None and no flag."""
    stat = config.statistic
    parts = config.components
    bench = [r for r in records if r["role"] == "benchmark"]
    ref = [r for r in records if r["role"] == "reference" and _usable(r, *parts)]
    scored = [r for r in bench if _usable(r, *parts)]
    for r in bench:
        r["p_value"] = r["q_value"] = r["flag"] = None
        r.pop("combined_score", None)
    if any(r["statistics"] and "gap" not in r["statistics"] for r in records) and "gap" in parts:
        raise ConfigError(
            f"--statistic {stat} needs every option order scored, and some items of this run "
            f"folder lack them: re-run its membership command with --statistic {stat} (it "
            "scores only the orders still missing)"
        )
    if not ref:
        refs = [r for r in records if r["role"] == "reference"]
        raise ConfigError(f"--reference: no reference item could be scored ({_why_none(refs)})")
    if not scored:
        raise ConfigError(
            f"--benchmark: no benchmark item could be scored ({_why_none(bench)})"
            if bench
            else "--benchmark: no benchmark item given (an empty selection)"
        )
    rows = np.array([[r["statistics"][c] for c in parts] for r in scored])
    ref_rows = np.array([[r["statistics"][c] for c in parts] for r in ref])
    test_settings: dict[str, Any] = {
        "alpha": config.alpha,
        "fdr": config.fdr,
        "n_boot": config.n_boot,
        "seed": config.seed,
    }
    test: MembershipResult
    if stat == "combined":
        test = CombinedTest(**test_settings).score(rows, ref_rows)
        for r, score in zip(scored, test.scores):
            r["combined_score"] = float(score)
    else:
        test = MembershipTest(**test_settings).score(rows[:, 0], ref_rows[:, 0])
    for i, r in enumerate(scored):
        r["p_value"] = float(test.p_values[i])
        r["q_value"] = None if test.q_values is None else float(test.q_values[i])
        r["flag"] = bool(test.flags[i])
    out = test.to_dict()
    out["statistic"] = stat
    out["flagged_items"] = [r["id"] for r in scored if r["flag"]]
    shown = [*STATISTICS, "gap"] if config.orders else list(STATISTICS)
    out["by_statistic"] = {name: _describe(records, name, config) for name in shown}
    return out


def build_summary(
    benchmark: LoadResult[MCQItem],
    reference: LoadResult[MCQItem],
    records: Sequence[dict[str, Any]],
    settings: dict[str, Any],
    config: MembershipConfig,
    scorer: CachedScorer,
    test: dict[str, Any],
    timing: dict[str, Any],
) -> dict[str, Any]:
    """summary.json: provenance, the null hypotheses, alpha and the FPR statement, counts, and
    the per-item and dataset-level tests."""
    loaded = {
        role: {"items_loaded": len(ld.items), "rows_skipped": len(ld.problems)}
        for role, ld in (("benchmark", benchmark), ("reference", reference))
    }
    return {
        "schema": SCHEMA,
        "method": "membership",
        "contamscope_version": __version__,
        "git_commit": git_commit(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "model": scorer.backend.describe(),
        "benchmark": {
            "source": benchmark.source,
            "format": benchmark.format,
            "content_hash": benchmark.content_hash,
            "files": len(benchmark.files),
            **notes_entry(benchmark.notes),
        },
        "reference": {
            "source": reference.source,
            "format": reference.format,
            "content_hash": reference.content_hash,
            "files": len(reference.files),
            **notes_entry(reference.notes),
        },
        "selection": settings["selection"],
        **_analysis_part(records, config, test, loaded),
        "skipped_rows": {
            "benchmark": [str(p) for p in benchmark.problems],
            "reference": [str(p) for p in reference.problems],
        },
        "excluded_items": [
            {"id": r["id"], "reason": r["excluded"]} for r in records if r.get("excluded")
        ],
        "timings": timing,
        "versions": package_versions(),
    }


def _analysis_part(
    records: Sequence[dict[str, Any]],
    config: MembershipConfig,
    test: dict[str, Any],
    loaded: dict[str, dict[str, int]],
) -> dict[str, Any]:
    """The keys of summary.json that the analysis settings decide (``loaded``: per role, the
    items loaded and rows skipped)."""
    counts: dict[str, Any] = {}
    for role in ROLES:
        recs = [r for r in records if r["role"] == role]
        counts[role] = {
            "items_loaded": loaded[role]["items_loaded"],
            "items_selected": len(recs),
            "items_analysed": sum(1 for r in recs if _usable(r, *config.components)),
            "excluded": dict(Counter(r["excluded"] for r in recs if r.get("excluded"))),
            "rows_skipped": loaded[role]["rows_skipped"],
        }
    return {
        "config": config.scoring_settings() | config.analysis_settings(),
        "text": "permutation template, original option order, scored from BOS (question and options)"
        + (
            "; and every option order, scored as the permutation test does" if config.orders else ""
        ),
        "null_hypothesis": {
            "item": COMBINED_NULL if config.statistic == "combined" else ITEM_NULL,
            "dataset": DATASET_NULL,
        },
        "alpha": config.alpha,
        "error_rate": test["error_rate"],
        "assumption": (
            "the reference items are texts the model cannot have seen, drawn like the benchmark "
            "items (same kind, format and length); a leaked reference makes the test conservative"
        ),
        "counts": counts,
        "statistics": test,
    }


@releases_run_dir
def reanalyse_membership(
    run_dir: RunFolder,
    *,
    statistic: Statistic | None = None,
    alpha: float | None = None,
    fdr: bool | None = None,
    n_boot: int | None = None,
    seed: int | None = None,
) -> MembershipOutcome:
    """Analyse a finished membership run again from its stored per-item statistics: no model,
    no data. Arguments left None keep the run's values (``seed``: the bootstrap's). A statistic the folder's records do
    not hold (``gap`` or ``combined`` on a run scored without the option orders, Min-K%++ from
    a model without vocabulary statistics) is refused: re-running the membership command with
    it scores what is missing. The records' p-values and flags and ``summary.json`` are
    rewritten, with the run's model, data and timings. ``run_dir`` may be a folder path."""
    run_dir = as_run_dir(run_dir)  # (a path: opened by the decorator; for the type)
    import json

    settings, old = run_dir.finished_run("membership")
    had = old["config"]
    config = MembershipConfig(
        statistic=statistic if statistic is not None else had["statistic"],
        k=had["k"],
        alpha=alpha if alpha is not None else had["alpha"],
        fdr=fdr if fdr is not None else had["fdr"],
        template=get_template(json.dumps(had["template"])),
        n_boot=n_boot if n_boot is not None else had["n_boot"],
        seed=seed if seed is not None else had["seed"],
        keep_orders="orders" in settings["config"],
    )
    again = f"re-run the membership command with --statistic {config.statistic}"
    if config.orders and "orders" not in settings["config"]:
        raise ConfigError(
            f"--statistic {config.statistic} needs every option order scored, and {run_dir.path} "
            f"was scored without them: {again} (it scores only the orders)"
        )
    if config.needs_vocab and not settings.get("vocab_stats"):
        raise ConfigError(
            f"--statistic {config.statistic} needs the vocabulary statistics (Min-K%++), which "
            f"the model of {run_dir.path} did not give"
        )
    done = run_dir.open(settings, mend=False)
    records = list(done.values())
    sel = settings.get("selection") or {}
    for role, key in (("benchmark", "n_items"), ("reference", "n_reference")):
        wanted, held = sel.get(key), sum(1 for k in done if k.startswith(f"{role}/"))
        if isinstance(wanted, int) and held < wanted:
            run_dir.close()
            raise StoreError(
                f"{run_dir.path} holds {held} of its {wanted} {role} items; re-run its "
                "membership command to finish it"
            )
    test = analyse(records, config)
    request = {"statistic": statistic, "alpha": alpha, "fdr": fdr, "n_boot": n_boot, "seed": seed}
    with run_dir.reanalysing(request):  # (left when a write below fails or is killed)
        run_dir.replace_records(records)
        loaded = {
            role: {k: old["counts"][role][k] for k in ("items_loaded", "rows_skipped")}
            for role in ROLES
        }
        summary = (
            old
            | _analysis_part(records, config, test, loaded)
            | {
                "contamscope_version": __version__,
                "git_commit": git_commit(),
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "versions": package_versions(),
            }
        )
        summary["verdict"] = printed_verdict(summary)
        run_dir.write_summary(summary)
    return MembershipOutcome(summary, run_dir.path, 0, len(records))
