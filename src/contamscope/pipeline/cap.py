"""CAP end to end: items -> modified items -> greedy predictions (cached) -> M, C -> PCR per split.

Each finished batch of items is appended to the run folder (resume), and the summary is always
recomputed from the stored records, so a run can be re-analysed with another alpha, scale or
threshold without the model (``build_cap_summary``).
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, TypedDict

from .. import __version__
from ..backends.base import GenerateRequest, ScoreRequest
from ..backends.probe import check_backend, without_chat_template
from ..data.cap import FINEVAL_PROMPT, CapData
from ..data.items import MCQItem, QAItem
from ..data.overlap import split_overlap
from ..detectors.cap import (
    LABELS,
    SCALES,
    Scale,
    adjust_for_family,
    compare_splits,
    jaccard,
    mcq_fields,
    pcr,
    refresh_choices,
    rouge_l,
    rouge_n,
    split_score,
)
from ..errors import ConfigError, ModelError, StoreError
from ..perturb.modify import (
    draw_year_shift,
    paraphrase_prompt,
    reorder_options,
    shift_item_years,
    split_context,
)
from ..perturb.templates import PromptTemplate, TemplateField
from ..store import (
    RUN_SCHEMA_VERSION,
    CachedScorer,
    RunFolder,
    as_run_dir,
    releases_run_dir,
)
from .inputs import Unpack, check_field_types, check_items
from .outcome import VerdictOutcome
from .provenance import (
    git_commit,
    notes_entry,
    package_versions,
    recorded_source,
    selection_settings,
)

__all__ = [
    "CAP_ANALYSIS",
    "CapAnalysis",
    "CONSISTENCY",
    "CapConfig",
    "CapOutcome",
    "READERS",
    "analysis_config",
    "build_cap_summary",
    "item_readings",
    "reanalyse_cap",
    "run_cap",
]

CONSISTENCY = {"mcq": "factual", "qa": "logical", "summary": "semantic"}
"""The consistency operation gamma used for each task (paper, section 3.5)."""
_METRIC = {"mcq": "exact_match", "qa": "rouge_l", "summary": "rouge_2"}
_MAX_NEW = {"mcq": 8, "qa": 64, "summary": 256}
_STOP: dict[str, tuple[str, ...]] = {"mcq": ("\n",), "qa": ("\n\n",), "summary": ()}
_SCALES: tuple[Scale, ...] = ("tanh", "linear", "sigmoid")


CAP_ANALYSIS = (
    "alpha", "scale", "n_boot", "min_diff", "similarity_threshold", "mcq_metric",
    "include_unmodified",
)  # fmt: skip
"""CapConfig fields only the analysis depends on (not in settings.json; summary.json's
``analysis`` holds them): other values re-analyse the stored records."""


class CapAnalysis(TypedDict, total=False):
    """:func:`reanalyse_cap`'s keyword arguments (:data:`CAP_ANALYSIS`; None keeps the
    run's value): a type checker refuses a misspelt one, as the function does."""

    alpha: float | None
    scale: Scale | None
    n_boot: int | None
    min_diff: float | None
    similarity_threshold: float | None
    mcq_metric: Literal["mapped", "strict"] | None
    include_unmodified: bool | None


@dataclass(frozen=True)
class CapConfig:
    """Settings of a CAP run (everything that changes the numbers or the verdict)."""

    task: Literal["mcq", "qa", "summary"] = "mcq"
    """Task type; sets the modification, M and C (mcq: factual / exact match / identical choice;
    qa: logical / ROUGE-L / Jaccard; summary: semantic / ROUGE-2 / embedding cosine)."""
    alpha: float = 0.01
    """PCR smoothing constant (paper: 0.01; 0.001 for tasks with small C such as ECTSum): the
    command's ``--pcr-alpha``. Not a test level, unlike ``alpha`` of the permutation and
    membership configs: CAP's verdict is at the fixed 5% level."""
    scale: Scale = "tanh"
    """PCR scale function: tanh (paper), linear, sigmoid."""
    seed: int = 0
    """Seed of the option re-orders, the year shift, the bootstrap and --sample."""
    max_new_tokens: int | None = None
    """Generation length; None = 8 (mcq), 64 (qa), 256 (summary)."""
    chat: bool = False
    """Wrap prompts in the model's chat template (instruct models)."""
    year_shift: int | None = None
    """Logical modification: years added; None = a seeded constant in +-[20, 40]."""
    include_answer_changing: bool = False
    """Logical: keep items whose reference answer holds a year (the edit changes the answer)."""
    include_unmodified: bool = False
    """Keep items whose modified input equals the original (a qa input without a year; AlphaFin
    research's supplied mod records, 216 of 500 train and 200 of 500 eval): consistent by
    construction, they raise every split's C and PCR alike and test nothing. The paper's code
    kept them; left out by default, counted in ``excluded``. Analysis only (no re-run)."""
    paraphrase_threshold: float = 0.98
    """Semantic: a generated paraphrase is kept only if its cosine to the original is >= this."""
    similarity_threshold: float = 0.95
    """Semantic C: two predictions agree when their embedding cosine is above this (paper 0.95)."""
    mcq_metric: Literal["mapped", "strict"] = "mapped"
    """mcq M: mapped = the rule-mapped choice is the answer; strict = the output is the letter."""
    loglik: bool = True
    """mcq: also choose the answer letter by log-likelihood when the backend can score."""
    n_boot: int = 2000
    """Bootstrap resamples for the CI of PCR_train - PCR_test."""
    min_diff: float = 0.0
    """Smallest |PCR difference| called evidence (in addition to the CI excluding 0)."""
    batch_items: int = 16
    """Items per generation batch (results are saved after each)."""
    template: TemplateField[PromptTemplate | None] = TemplateField(None)
    """mcq: the prompt layout (``--template``: question, option lines, answer cue); None =
    FinEval's for FinEval items, else ``Question: ...`` / ``A. ...`` / ``Answer:``."""

    def __post_init__(self) -> None:
        check_field_types(self, {"n_boot": "--bootstrap", "alpha": "--pcr-alpha"})
        if self.task not in CONSISTENCY:
            raise ConfigError(f"--task {self.task!r}: expected mcq, qa or summary")
        if self.template is not None and self.task != "mcq":
            raise ConfigError(f"--template lays out multiple-choice prompts; --task is {self.task}")
        if self.scale not in SCALES:
            raise ConfigError(f"--scale {self.scale!r}: expected one of {', '.join(SCALES)}")
        if not (math.isfinite(self.alpha) and self.alpha >= 0):
            raise ConfigError(f"--pcr-alpha (alpha) {self.alpha:g}: must be a number >= 0")
        if not (math.isfinite(self.min_diff) and self.min_diff >= 0):
            raise ConfigError(f"--min-diff {self.min_diff:g}: must be a number >= 0")
        for opt, v in (
            ("--paraphrase-threshold", self.paraphrase_threshold),
            ("--similarity-threshold", self.similarity_threshold),
        ):
            if not 0 < v <= 1:  # also false for nan
                raise ConfigError(f"{opt} ({opt[2:].replace('-', '_')}) {v:g}: must be in (0, 1]")
        if self.mcq_metric not in ("mapped", "strict"):
            raise ConfigError("--mcq-metric: expected mapped or strict")
        if self.n_boot < 100:
            raise ConfigError(f"--bootstrap (n_boot) {self.n_boot}: must be at least 100")
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise ConfigError("--max-new-tokens must be at least 1")
        if self.year_shift == 0:  # every modified input would be the original: nothing tested
            raise ConfigError(
                "--year-shift 0: shifts no year, so no input is modified; give a "
                "non-zero number of years (default: seeded +-20..40)"
            )

    @property
    def new_tokens(self) -> int:
        return self.max_new_tokens or _MAX_NEW[self.task]

    def settings(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("batch_items")
        d.pop("template")  # absent unless given: run folders from before it still match
        if self.template is not None:
            d["template"] = self.template.describe() | {"answer": self.template.answer}
        for k in CAP_ANALYSIS:
            d.pop(k)  # analysis-only: changing them re-analyses stored records, no re-run needed
        d["consistency"] = CONSISTENCY[self.task]
        d["metric"] = _METRIC[self.task]
        d["max_new_tokens"] = self.new_tokens
        return d


@dataclass(repr=False)  # Outcome.__repr__: the summary is too long to print
class CapOutcome(VerdictOutcome):
    """A CAP run's outcome (its verdict always there; ``problems``: rows skipped)."""

    @property
    def generated_now(self) -> int:
        """The earlier name of ``scored_now``: items whose answers this call generated."""
        return self.scored_now


def mcq_prompt(item: MCQItem, template: PromptTemplate | None = None) -> str:
    """The prompt of a multiple-choice item: ``template``'s layout when given, else FinEval's
    for FinEval items and English for the others."""
    if template is not None:
        return template.prompt(item)
    if item.meta.get("prompt_style") == "fineval":
        opts = ", ".join(f"'{LABELS[i]}': {o}" for i, o in enumerate(item.options))
        return FINEVAL_PROMPT.format(question=item.question, options=opts)
    lines = [f"Question: {item.question}"]
    lines += [f"{LABELS[i]}. {o}" for i, o in enumerate(item.options)]
    return "\n".join(lines) + "\nAnswer:"


def mcq_input(item: MCQItem, template: PromptTemplate | None, supplied: bool) -> str:
    """The prompt CAP sends for ``item``: its own ``input`` when the data supply one (FinEval's
    files) and no ``template`` lays it out, else :func:`mcq_prompt`."""
    given = item.meta.get("input") if supplied and template is None else None
    return given or mcq_prompt(item, template)


def layout_warnings(data: CapData, splits: Iterable[str], config: CapConfig) -> list[str]:
    """The selected splits' :attr:`~contamscope.data.cap.CapSplit.layout_note` s: supplied
    modified inputs framed unlike their originals; none for mcq under a ``template``, which
    lays out both alike."""
    if config.task == "mcq" and config.template is not None:
        return []
    return [n for s in splits if (n := data.splits[s].layout_note)]


def _letter_cont(prompt: str, letter: str) -> str:
    last = prompt[-1:] if prompt else ""
    return letter if (not last or last.isspace() or not last.isascii()) else " " + letter


@dataclass
class _Plan:
    split: str
    item: Any
    modified: Any
    prompt: str
    modified_prompt: Any
    modification: dict[str, Any]
    excluded: str | None = None
    para_req: GenerateRequest | None = None
    head: str = ""


def _plan(split: str, item: Any, supplied: Any | None, cfg: CapConfig, shift: int) -> _Plan:
    if cfg.task == "mcq":
        t = cfg.template
        if supplied is not None:
            p0, p1 = mcq_input(item, t, True), mcq_input(supplied, t, True)
            return _Plan(split, item, supplied, p0, p1, {"kind": "factual", "supplied": True})
        reordered, order = reorder_options(item, seed=cfg.seed)
        what = {"kind": "factual", "supplied": False, "order": list(order)}
        return _Plan(split, item, reordered, mcq_prompt(item, t), mcq_prompt(reordered, t), what)
    if cfg.task == "qa":
        if supplied is not None:
            mod: Any = QAItem(
                item.id, supplied.question, supplied.answer, split, meta=supplied.meta
            )
            # (an original without its answer has none to change: no_reference, not left
            # out as answer-changing; CAP QA)
            changes = item.answer is not None and (supplied.answer or "").strip() != (
                item.answer.strip()
            )
            what = {"kind": "logical", "supplied": True, "changes_answer": changes}
        else:
            mod, ys = shift_item_years(item, shift)
            what = dict(ys.to_dict(), supplied=False)
            changes = ys.changes_answer
            if ys.n_input == 0:
                what["note"] = "no year in the input: modified input equals the original"
        plan = _Plan(split, item, mod, item.question, mod.question, what)
        if changes and not cfg.include_answer_changing:
            plan.excluded = "modification changes the reference answer"
        return plan
    if supplied is not None:
        what = {"kind": "semantic", "supplied": True}
        return _Plan(split, item, supplied, item.question, supplied.question, what)
    head, passage = split_context(item.question)
    req = GenerateRequest(
        paraphrase_prompt(passage),
        max_new_tokens=min(4096, len(passage) // 3 + 32),
        chat=cfg.chat,
    )
    return _Plan(
        split,
        item,
        None,
        item.question,
        None,
        {"kind": "semantic", "supplied": False},
        None,
        req,
        head,
    )


def _paraphrase(
    plans: list[_Plan], paraphraser: CachedScorer, embedder: Any, cfg: CapConfig
) -> None:
    todo = [p for p in plans if p.para_req is not None and p.excluded is None]
    if not todo:
        return
    gens = paraphraser.generate([p.para_req for p in todo])  # type: ignore[misc]
    passages = [split_context(p.item.question)[1] for p in todo]
    sims = embedder.similarity(passages, [g.text for g in gens])
    for p, g, sim in zip(todo, gens, sims):
        text = g.text.strip()
        p.modification.update(similarity=round(sim, 6), paraphraser=paraphraser.backend.spec)
        p.modified_prompt = p.head + text
        p.modified = QAItem(p.item.id, p.modified_prompt, p.item.answer, p.split)
        if not text:
            p.excluded = "empty paraphrase"
        elif sim < cfg.paraphrase_threshold:
            p.excluded = f"paraphrase similarity {sim:.4f} below {cfg.paraphrase_threshold}"


def _metrics(p: _Plan, g0: Any, g1: Any, cfg: CapConfig) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if cfg.task == "mcq":
        item, mod = p.item, p.modified
        out.update(mcq_fields(g0.text, item.options, item.answer, g1.text, mod.options, mod.answer))
    elif cfg.task == "qa":
        ref = p.item.answer
        out["m"] = None if ref is None else rouge_l(g0.text, ref)
        mref = p.modified.answer
        out["m_modified"] = None if mref is None else rouge_l(g1.text, mref)
        out["c"] = jaccard(g0.text, g1.text)
    else:
        ref = p.item.answer
        out["m"] = None if ref is None else rouge_n(g0.text, ref, 2)
        out["m_modified"] = None if ref is None else rouge_n(g1.text, ref, 2)
    return out


UNMODIFIED = "modified input equals the original (tests no consistency)"
"""The exclusion reason of an item whose modification left its input as it was."""


def unmodified(rec: dict[str, Any]) -> bool:
    """Whether a record's modified input is its original input (whitespace at the ends aside)."""
    mod = rec.get("modified_input")
    return mod is not None and str(mod).strip() == str(rec.get("input") or "").strip()


def _record(p: _Plan) -> dict[str, Any]:
    it = p.item
    rec: dict[str, Any] = {
        "id": f"{p.split}/{it.id}",
        "split": p.split,
        "item_id": it.id,
        "source": it.source,
        "line": it.line,
        "input": p.prompt,
        "modified_input": p.modified_prompt,
        "modification": p.modification,
        "excluded": p.excluded,
    }
    if isinstance(it, MCQItem):
        rec["options"] = list(it.options)
        rec["answer"] = it.answer
        if p.modified is not None:
            rec["modified_options"] = list(p.modified.options)
            rec["modified_answer"] = p.modified.answer
    else:
        rec["reference"] = it.answer
        if p.modified is not None and p.modified.answer != it.answer:
            rec["modified_reference"] = p.modified.answer
    return rec


def check_splits(data: CapData, splits: Sequence[str], task: str | None = None) -> None:
    """Refuse, before any work, what CAP cannot compare: fewer than two splits, a split the data
    lacks, one without reference answers (its performance M is undefined), or a ``task`` (the
    config's) other than the data's."""
    if task is not None and task != data.task:
        raise ConfigError(
            f"--task {task!r}, but {data.source} is read as a {data.task!r} task; "
            f"use CapConfig(task={data.task!r})"
        )
    if len(splits) < 2:
        raise ConfigError("--splits: give at least two splits, e.g. train,test")
    for s in splits:
        if s not in data.splits:
            raise ConfigError(
                f"--splits: {data.source} has no split {s!r} (it has {', '.join(data.splits)})"
            )
        split = data.splits[s]
        if all(getattr(it, "answer", None) is None for it in split.items):
            where = split.files[0] if split.files else data.source
            raise ConfigError(
                f"--splits: split {s!r} has no reference answers ({where}), "
                "so CAP's performance M is undefined there; pick splits with answers"
            )


class _BarShare:
    """A progress callback that moves ``on_items`` by ``per`` items a finished request."""

    def __init__(self, on_items: Callable[[float], None] | None, per: float) -> None:
        self.on_items, self.per, self.shown = on_items, per, 0.0

    def __call__(self, n: int) -> None:
        if self.on_items is not None:
            self.shown += n * self.per
            self.on_items(n * self.per)


def _check_split_items(data: CapData, name: str, chosen: Sequence[Any]) -> None:
    """Refuse an item given under split ``name`` that is not one of that split's: one of
    another split was recorded as of this one, and the verdict, which names a split, came
    out reversed (library QA); one of no split would record the loaded benchmark's
    provenance for it."""
    own = {it.id: it for it in data.splits[name].items}
    for it in chosen:
        if own.get(it.id) == it:
            continue
        other = next(
            (s for s, sp in data.splits.items() if s != name and any(x == it for x in sp.items)),
            None,
        )
        where = (
            f"an item of split {other!r}"
            if other is not None
            else f"not an item of split {name!r} of the loaded benchmark ({data.source})"
        )
        raise ConfigError(
            f"selected[{name!r}]: {it.id!r} is {where}; give each split's items under its name"
        )


@releases_run_dir
def run_cap(
    data: CapData,
    selected: Mapping[str, Iterable[Any]],
    scorer: CachedScorer,
    run_dir: RunFolder,
    config: CapConfig,
    *,
    paraphraser: CachedScorer | None = None,
    embedder: Any = None,
    selection: dict[str, Any] | None = None,
    overwrite: bool = False,
    on_start: Callable[[int, int], None] | None = None,
    on_items: Callable[[float], None] | None = None,
) -> CapOutcome:
    """Generate predictions on original and modified inputs of every selected item; write records
    and a summary. ``embedder`` (a :class:`~contamscope.embed.SentenceEmbedder`) is needed for
    the summary task."""
    run_dir = as_run_dir(run_dir)  # (a path: opened by the decorator; for the type)
    if not isinstance(selected, Mapping):
        raise ConfigError(
            f"selected: a {type(selected).__name__}; give a dict of split name -> items "
            "(e.g. {name: data.splits[name].items for name in data.splits})"
        )
    check_splits(data, list(selected), config.task)
    chosen_in = {
        name: check_items(chosen, object, "CAP", f"split {name}")
        for name, chosen in selected.items()
    }
    for name, chosen in chosen_in.items():
        _check_split_items(data, name, chosen)
    backend = scorer.backend
    counted = scorer.mark()
    check_backend(backend, generate=True, method="CAP")
    para = paraphraser or scorer
    for model in (backend, para.backend) if config.chat else ():
        if without_chat_template(model):  # (--chat was recorded and plain text used; Gemma QA)
            raise ConfigError(
                f"--chat: {model.spec} has no chat template (a base model: its prompts are "
                "plain text); leave --chat out"
            )
    if config.task == "summary":
        if embedder is None:
            raise ConfigError("the summary task needs an embedding model (semantic consistency)")
        if any(data.splits[s].modified is None for s in chosen_in):
            check_backend(para.backend, generate=True, method="CAP paraphrasing")
    shift = config.year_shift if config.year_shift is not None else draw_year_shift(config.seed)
    use_loglik = config.task == "mcq" and config.loglik and backend.capabilities.prompt_logprobs
    settings = {
        "method": "cap",
        "run_schema": RUN_SCHEMA_VERSION,
        "model": backend.spec,
        "model_fingerprint": scorer.fingerprint,
        "paraphraser": para.fingerprint if config.task == "summary" else None,
        "embedder": embedder.describe() if embedder is not None else None,
        "benchmark": recorded_source(data.source),
        "benchmark_hash": data.content_hash,
        "selection": selection_settings(
            None,
            [f"{s}/{it.id}" for s, items in chosen_in.items() for it in items],
            selection,
            {s: len(items) for s, items in chosen_in.items()},  # per split, as the command
        ),
        "config": dict(config.settings(), year_shift=shift if config.task == "qa" else None),
    }
    done = run_dir.open(settings, overwrite=overwrite, renamed=scorer.renamed | para.renamed)
    pairs = [(s, it) for s, items in chosen_in.items() for it in items]
    wanted = {f"{s}/{it.id}" for s, it in pairs}
    done = {k: v for k, v in done.items() if k in wanted}
    todo = [(s, it) for s, it in pairs if f"{s}/{it.id}" not in done]
    if on_start is not None:
        on_start(len(pairs), len(done))
    t0 = time.perf_counter()
    # the optional log-likelihood reader failing (a server refusing or garbling the scoring
    # requests) does not stop the generations: they go on into the cache, the records wait
    # (a record is written with both readers or not at all), and the error comes at the end
    reader_failed: ModelError | None = None
    waiting = 0
    for b in range(0, len(todo), config.batch_items):
        batch = todo[b : b + config.batch_items]
        plans = []
        for s, it in batch:
            supplied = (data.splits[s].modified or {}).get(it.id)
            plans.append(_plan(s, it, supplied, config, shift))
        if config.task == "summary":
            _paraphrase(plans, para, embedder, config)
        live = [p for p in plans if p.excluded is None or config.task == "qa"]
        reqs = [
            GenerateRequest(t, config.new_tokens, _STOP[config.task], config.chat)
            for p in live
            for t in (p.prompt, p.modified_prompt or p.prompt)
        ]
        # generations move the bar as they come (a served model's batch showed 0 for half an
        # hour, QA); the rest of the batch's items at its end
        shown = _BarShare(on_items, len(live) / max(len(reqs), 1) / (2 if use_loglik else 1))
        gens = scorer.generate(reqs, shown) if reqs else []
        ll: list[Any] = []
        if use_loglik and live and reader_failed is None:
            sreqs = [
                ScoreRequest(t, _letter_cont(t, LABELS[k]))
                for p in live
                for t, opts in ((p.prompt, p.item.options), (p.modified_prompt, p.modified.options))
                for k in range(len(opts))
            ]
            try:
                ll = scorer.score(sreqs)
            except ModelError as exc:
                reader_failed = exc
        if reader_failed is not None:
            waiting += len(batch)
            if on_items is not None:
                on_items(len(batch) - shown.shown)
            continue
        records = {id(p): _record(p) for p in plans}
        pos = 0
        for k, p in enumerate(live):
            g0, g1 = gens[2 * k], gens[2 * k + 1]
            rec = records[id(p)]
            rec.update(
                prediction=g0.text,
                modified_prediction=g1.text,
                finish_reasons=[g0.finish_reason, g1.finish_reason],
                n_tokens=[g0.n_tokens, g1.n_tokens],
            )
            lp0 = lp1 = None
            if use_loglik:
                n0, n1 = len(p.item.options), len(p.modified.options)
                lp0 = [r.logprob for r in ll[pos : pos + n0]]
                lp1 = [r.logprob for r in ll[pos + n0 : pos + n0 + n1]]
                pos += n0 + n1
            if "context" in rec["finish_reasons"]:  # nothing generated: no answer to judge
                rec["excluded"] = "longer than the model's context window"
                continue
            rec.update(_metrics(p, g0, g1, config))
            if lp0 is not None and lp1 is not None and all(map(math.isfinite, lp0 + lp1)):
                rec["loglik"] = {"original": lp0, "modified": lp1}
        if config.task == "summary" and live:
            judged = [p for p in live if p.excluded is None and not records[id(p)]["excluded"]]
            a = [records[id(p)]["prediction"] for p in judged]
            bb = [records[id(p)]["modified_prediction"] for p in judged]
            sims = iter(embedder.similarity(a, bb) if a else [])
            for p in judged:
                records[id(p)]["similarity"] = round(next(sims), 6)
        out = [records[id(p)] for p in plans]
        run_dir.append(out)
        for r in out:
            done[r["id"]] = r
        if on_items is not None:
            on_items(len(batch) - shown.shown)
    if reader_failed is not None:
        raise ModelError(
            f"CAP's log-likelihood reader failed: {reader_failed}; the answers of the "
            f"{waiting} item(s) not yet written are generated and cached, so a re-run finishes "
            "without generating them again (--no-loglik goes without that reader)"
        ) from reader_failed
    elapsed = time.perf_counter() - t0
    computed, reused = scorer.since(counted)
    ordered = [done[f"{s}/{it.id}"] for s, it in pairs if f"{s}/{it.id}" in done]
    summary = build_cap_summary(
        ordered,
        config,
        splits=list(chosen_in),
        provenance={
            "contamscope_version": __version__,
            "git_commit": git_commit(),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "model": backend.describe(),
            "paraphraser": para.backend.describe() if config.task == "summary" else None,
            "embedder": settings["embedder"],
            "benchmark": {
                "source": data.source,
                "format": data.format,
                "content_hash": data.content_hash,
                "task": data.task,
                "task_detected": data.task_detected,
                "files": {s: data.splits[s].files for s in chosen_in},
                "selection": settings["selection"],
                "overlap_selected": split_overlap(chosen_in).counts(),
                **notes_entry(data.notes),
            },
            "config": settings["config"],
            "skipped_rows": [str(p) for p in data.problems],
            "layout_warnings": layout_warnings(data, chosen_in, config),
            "timings": run_dir.with_earlier_timings(
                {
                    "seconds": round(elapsed, 3),
                    "items_now": len(todo),
                    "items_resumed": len(pairs) - len(todo),
                    "requests_computed": computed,
                    "requests_from_cache": reused,
                },
                backend.describe(),
            ),
            "versions": package_versions(),
        },
    )
    run_dir.write_summary(summary)
    return CapOutcome(
        summary, run_dir.path, len(todo), len(pairs) - len(todo), [str(p) for p in data.problems]
    )


@releases_run_dir
def reanalyse_cap(run_dir: RunFolder, **analysis: Unpack[CapAnalysis]) -> CapOutcome:
    """Analyse a finished CAP run again from its stored records: no model, no data, nothing
    generated. ``analysis`` takes :data:`CAP_ANALYSIS` fields (``alpha``: the PCR constant,
    ``scale``, ``n_boot``, ``min_diff``, ``similarity_threshold``, ``mcq_metric``,
    ``include_unmodified``); the others keep the run's values. ``summary.json`` is rewritten,
    with the run's model, data and timings. ``run_dir`` may be a folder path."""
    run_dir = as_run_dir(run_dir)  # (a path: opened by the decorator; for the type)
    unknown = sorted(set(analysis) - set(CAP_ANALYSIS))
    if unknown:
        raise ConfigError(f"CAP's analysis has no setting {unknown[0]!r}")
    settings, old = run_dir.finished_run("cap")
    kept = old.get("analysis") or {}
    stored = settings["config"]
    given = {k: v for k, v in analysis.items() if v is not None}
    config = CapConfig(
        task=stored["task"],
        seed=stored["seed"],
        paraphrase_threshold=stored.get("paraphrase_threshold", 0.98),
        **{k: kept[k] for k in CAP_ANALYSIS if kept.get(k) is not None} | given,
    )
    done = run_dir.open(settings, mend=False)
    splits = list(old["splits"])
    place = {s: i for i, s in enumerate(splits)}
    records = sorted(
        (r for r in done.values() if r.get("split") in place), key=lambda r: place[r["split"]]
    )
    try:  # (a short items.jsonl rebuilt the summary on what was left, down to 0 items; QA)
        wanted = sum(int(old["counts"][split]["items"]) for split in splits)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise StoreError(
            f"{run_dir.path}/summary.json: not a complete CAP summary ({exc})"
        ) from None
    if len(records) < wanted:
        raise StoreError(
            f"{run_dir.path} holds {len(records)} of its {wanted} items; re-run its cap "
            "command to finish it"
        )
    analysed = set(_ANALYSIS_KEYS)
    provenance = {k: v for k, v in old.items() if k not in analysed} | {
        "contamscope_version": __version__,
        "git_commit": git_commit(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "versions": package_versions(),
    }
    summary = build_cap_summary(records, config, splits=splits, provenance=provenance)
    with run_dir.reanalysing(analysis):  # (one write: the marker of an earlier kill goes)
        run_dir.write_summary(summary)
    return CapOutcome(summary, run_dir.path, 0, len(records), list(old.get("skipped_rows") or []))


def _item_c(rec: dict[str, Any], cfg: CapConfig) -> float | None:
    if cfg.task == "summary":
        sim = rec.get("similarity")
        return None if sim is None else float(sim > cfg.similarity_threshold)
    c = rec.get("c")
    return None if c is None else float(c)


def _item_m(rec: dict[str, Any], cfg: CapConfig, key: str) -> float | None:
    if cfg.task == "mcq" and cfg.mcq_metric == "strict":
        key = "strict_" + key
    v = rec.get(key)
    return None if v is None else float(v)


READERS = ("generate", "loglik")
"""How an item's answer is read: greedy generation (the paper's), and for multiple choice the
answer letter of highest log-likelihood (when the backend scores)."""


def item_readings(rec: dict[str, Any], cfg: CapConfig) -> dict[str, tuple[float, float]]:
    """An analysed record's (M, C) per reader, as :func:`build_cap_summary` counts it; empty for
    an item it leaves out (excluded, unmodified unless ``cfg.include_unmodified``, no
    reference, no consistency value)."""
    if rec.get("excluded") or (not cfg.include_unmodified and unmodified(rec)):
        return {}
    refresh_choices(rec)
    m, cons = _item_m(rec, cfg, "m"), _item_c(rec, cfg)
    if m is None or cons is None:
        return {}
    out = {"generate": (m, cons)}
    lr = _loglik_rows(rec)
    if lr is not None:
        out["loglik"] = (lr[0], lr[2])
    return out


def analysis_config(summary: dict[str, Any]) -> CapConfig:
    """The CapConfig a finished run's summary.json was analysed with (task, seed and the
    :data:`CAP_ANALYSIS` fields; generation settings are left at their defaults)."""
    stored = summary.get("config") or {}
    kept = summary.get("analysis") or {}
    return CapConfig(
        task=summary.get("task") or stored.get("task", "mcq"),
        seed=stored.get("seed", 0),
        paraphrase_threshold=stored.get("paraphrase_threshold", 0.98),
        chat=bool(stored.get("chat", False)),
        **{k: kept[k] for k in CAP_ANALYSIS if kept.get(k) is not None},
    )


def _loglik_rows(rec: dict[str, Any]) -> tuple[float, float, float] | None:
    ll = rec.get("loglik")
    if not ll or rec.get("answer") is None:
        return None
    lo, lm = ll["original"], ll["modified"]
    if not all(math.isfinite(x) for x in lo + lm):  # a prompt past the context window
        return None
    c0, c1 = lo.index(max(lo)), lm.index(max(lm))
    m = float(c0 == rec["answer"])
    mm = float(c1 == rec.get("modified_answer"))
    c = float(rec["options"][c0].strip() == rec["modified_options"][c1].strip())
    return m, mm, c


def _reader_stats(
    rows: dict[str, list[tuple[float, float | None, float]]], splits: list[str], cfg: CapConfig
) -> dict[str, Any]:
    scores = {}
    for s in splits:
        r = rows.get(s, [])
        mods = [x[1] for x in r]
        scores[s] = split_score(
            [x[0] for x in r],
            [x[2] for x in r],
            [m for m in mods if m is not None] if r and all(m is not None for m in mods) else None,
            alpha=cfg.alpha,
            scale=cfg.scale,
        )
    ref = splits[0]

    found = [
        compare_splits(
            ref,
            other,
            ([x[0] for x in rows.get(ref, [])], [x[2] for x in rows.get(ref, [])]),
            ([x[0] for x in rows.get(other, [])], [x[2] for x in rows.get(other, [])]),
            scores[ref],
            scores[other],
            alpha=cfg.alpha,
            scale=cfg.scale,
            n_boot=cfg.n_boot,
            seed=cfg.seed + k,
            min_diff=cfg.min_diff,
        )
        for k, other in enumerate(splits[1:], start=1)
    ]
    found = adjust_for_family(found, n_boot=cfg.n_boot, min_diff=cfg.min_diff)
    comps = [c.to_dict() for c in found]
    ablation = {
        f"{scale}/alpha={a:g}": {
            s: _finite(pcr(scores[s].m, scores[s].c, alpha=a, scale=scale)) if scores[s].n else None
            for s in splits
        }
        for scale in _SCALES
        for a in (0.0, 0.001, 0.01, 0.1)
    }
    return {
        "splits": {s: scores[s].to_dict() for s in splits},
        "comparisons": comps,
        "ablation": ablation,
    }


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def overall_verdict(comparisons: list[dict[str, Any]]) -> tuple[str, str]:
    """Top-line verdict: contamination of any compared split first, then fine-tuning."""
    cont = [c for c in comparisons if c["verdict"].startswith("contaminated")]
    tuned = [c for c in comparisons if c["verdict"].startswith("fine-tuned")]
    if cont:
        return f"likely contaminated by {', '.join(c['other'] for c in cont)}", cont[0]["reasoning"]
    if tuned:
        return f"likely fine-tuned on {tuned[0]['reference']}", tuned[0]["reasoning"]
    if not comparisons:
        return "no evidence", "only one split"
    why = "; ".join(c["reasoning"] for c in comparisons)
    if any(c["verdict"] == "inconclusive" for c in comparisons):
        return "inconclusive", why
    return "no evidence", why


_ANALYSIS_KEYS = (
    "schema", "method", "task", "consistency", "metric", "analysis", "splits", "counts",
    "statistics", "verdict",
)  # fmt: skip
"""The keys of summary.json that :func:`build_cap_summary` computes; the rest is provenance."""


def _reason_kind(reason: str) -> str:
    """An exclusion reason without its item's own number, to count by: a summary item's
    "paraphrase similarity 0.0568 below 0.98" was a reason of its own, one count per item (its
    similarity stays in the record).

    >>> _reason_kind("paraphrase similarity 0.0568 below 0.98")
    'paraphrase similarity below 0.98'
    """
    return re.sub(
        r"^paraphrase similarity [-0-9.e]+ below ", "paraphrase similarity below ", reason
    )


def build_cap_summary(
    records: Sequence[dict[str, Any]],
    config: CapConfig,
    *,
    splits: list[str],
    provenance: dict[str, Any],
) -> dict[str, Any]:
    """summary.json from stored records: counts, M / C / PCR per split, comparisons, verdict."""
    for r in records:
        refresh_choices(r)
    counts: dict[str, Any] = {}
    generated = empty = 0
    rows: dict[str, list[tuple[float, float | None, float]]] = {}
    ll_rows: dict[str, list[tuple[float, float | None, float]]] = {}
    for s in splits:
        recs = [r for r in records if r["split"] == s]
        excluded = Counter(_reason_kind(r["excluded"]) for r in recs if r.get("excluded"))
        n_nom = 0
        for r in recs:
            if r.get("excluded"):
                continue
            if not config.include_unmodified and unmodified(r):
                excluded[UNMODIFIED] += 1
                continue
            m, cons = _item_m(r, config, "m"), _item_c(r, config)
            if m is None:
                n_nom += 1
                continue
            if cons is None:
                continue
            rows.setdefault(s, []).append((m, _item_m(r, config, "m_modified"), cons))
            lr = _loglik_rows(r)
            if lr is not None:
                ll_rows.setdefault(s, []).append(lr)
        # the answers generated: not those of items left out unasked (too long for the model's
        # context: their empty predictions were counted as empty and unmapped answers; QA)
        gen = [
            r for r in recs if "prediction" in r and "context" not in r.get("finish_reasons", [])
        ]
        empty_o = sum(1 for r in gen if not r["prediction"].strip())
        empty_m = sum(1 for r in gen if not r["modified_prediction"].strip())
        stops = [r.get("finish_reasons") or [] for r in gen]
        generated, empty = generated + 2 * len(gen), empty + empty_o + empty_m
        c: dict[str, Any] = {
            "items": len(recs),
            "analysed": len(rows.get(s, [])),
            "excluded": dict(excluded),
            "no_reference": n_nom,
            "empty_predictions": {"original": empty_o, "modified": empty_m},
            # items with an answer cut at --max-new-tokens (an int, as summaries had it), and
            # per version, as the counts beside it
            "truncated_predictions": sum(1 for f in stops if "length" in f),
            "truncated_by_version": {
                side: sum(1 for f in stops if len(f) > i and f[i] == "length")
                for i, side in enumerate(("original", "modified"))
            },
        }
        if config.task == "mcq":
            unm_o = sum(1 for r in gen if r.get("choice") is None)
            unm_m = sum(1 for r in gen if r.get("modified_choice") is None)
            c["unmapped"] = {"original": unm_o, "modified": unm_m}
            c["unmapped_rate"] = round((unm_o + unm_m) / (2 * len(gen)), 4) if gen else None
        if config.task == "qa":
            c["answer_changing"] = sum(
                1 for r in recs if r.get("modification", {}).get("changes_answer")
            )
        if config.task == "summary":
            sims = [
                r["modification"]["similarity"]
                for r in recs
                if "similarity" in r.get("modification", {})
            ]
            c["paraphrases"] = {
                "generated": len(sims),
                "kept": sum(1 for x in sims if x >= config.paraphrase_threshold),
            }
        counts[s] = c
    stats = {"generate": _reader_stats(rows, splits, config)}
    if ll_rows:
        stats["loglik"] = _reader_stats(ll_rows, splits, config)
    label, why = overall_verdict(stats["generate"]["comparisons"])
    if generated and empty == generated and not config.chat:  # (the Python guide's example)
        why += (
            f"; all {generated} answers generated are empty: an instruct model without its chat "
            "template often ends at once (--chat; CapConfig(chat=True))"
        )
    return {
        "schema": "contamscope.cap.summary/1",
        "method": "cap",
        **provenance,
        "task": config.task,
        "consistency": CONSISTENCY[config.task],
        "metric": _METRIC[config.task],
        "analysis": {
            "alpha": config.alpha,
            "scale": config.scale,
            "n_boot": config.n_boot,
            "min_diff": config.min_diff,
            "similarity_threshold": config.similarity_threshold
            if config.task == "summary"
            else None,
            "mcq_metric": config.mcq_metric if config.task == "mcq" else None,
            "include_unmodified": config.include_unmodified,
            "reference_split": splits[0],
            "null_hypothesis": "PCR_reference = PCR_other: both splits equally exposed to the model",
        },
        "splits": splits,
        "counts": counts,
        "statistics": stats,
        "verdict": {"label": label, "reasoning": why},
    }
