"""BenBench (Xu et al. 2024), end to end: QA items and their paraphrases -> per-token statistics
(one teacher-forced pass per text) -> perplexity, n-gram accuracy, instance flags -> records and a
summary with Delta (original - paraphrase) per split and Delta_train - Delta_test.

Exact-match n-grams come from the teacher-forced pass at every starting point; greedy generation
runs only at starting points where a lenient criterion (ROUGE-L, edit similarity) needs the
predicted text. Everything goes through the score cache; each finished batch is appended to the
run folder (resume), and the summary is recomputed from the stored records.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from .. import __version__
from ..backends.base import Backend, GenerateRequest, ScoreRequest, TokenStats
from ..backends.probe import check_backend, without_chat_template
from ..data.items import LoadResult, QAItem
from ..detectors.benbench import (
    LOWER_IS_FAMILIAR,
    METRICS,
    NgramResult,
    answer_perplexity,
    delta_stats,
    delta_train_test,
    edit_similarity,
    first_mismatch,
    mean_or_none,
    ngram_item,
    paraphrase_test,
    rouge_l_f,
    split_label_p,
    starting_points,
)
from ..errors import ConfigError, note
from ..perturb.paraphrase import Paraphrase, paraphrase_prompt
from ..store import (
    RUN_SCHEMA_VERSION,
    CachedScorer,
    RunDir,
    RunFolder,
    analysis_upgrade,
    as_run_dir,
    releases_run_dir,
)
from .benbench_refs import ReferenceSet, inline_reference, pair_reference
from .inputs import Unpack, check_field_types, check_from, check_items
from .outcome import Outcome, printed_verdict
from .provenance import git_commit, package_versions, recorded_source, selection_settings
from .served import refuse_changed_server

__all__ = [
    "BenBenchConfig",
    "SplitInput",
    "BenBenchOutcome",
    "run_benbench",
    "reanalyse_benbench",
    "build_summary",
    "ANALYSIS_ONLY",
    "BenBenchAnalysis",
]

SCHEMA = "contamscope.benbench.summary/1"

ANALYSIS_ONLY = ("rouge_threshold", "edit_threshold", "inclusive", "n_boot", "seed")
"""Settings of a BenBench run that only the analysis depends on: the lenient criteria's
thresholds (each n-gram's ROUGE-L and edit similarity are stored), and the bootstrap's
resamples and seed. A run folder re-run (or ``contamscope reanalyse``) with other values
re-derives its records from the stored n-grams instead of scoring anything."""


class BenBenchAnalysis(TypedDict, total=False):
    """:func:`reanalyse_benbench`'s keyword arguments (:data:`ANALYSIS_ONLY`; None keeps the
    run's value): a type checker refuses a misspelt one, as the function does."""

    rouge_threshold: float | None
    edit_threshold: float | None
    inclusive: bool | None
    n_boot: int | None
    seed: int | None


@dataclass(frozen=True)
class BenBenchConfig:
    """Settings of a BenBench run (everything that changes the numbers or flags)."""

    n: int = 5
    """n-gram length (tokens), the paper's 5."""
    k: int = 5
    """Starting points per text, evenly spaced as in the paper's code (``np.linspace``)."""
    ppl_prefix: str = "{question} Answer:"
    """Perplexity layout, conditioning part: the paper's ``question + " Answer:"``."""
    ppl_continuation: str = " {answer}"
    """Perplexity layout, scored part (the answer tokens, with their leading space)."""
    ngram_text: str = "{question} {answer}"
    """The text whose n-grams are predicted: question and answer joined by a space (paper)."""
    lenient: bool = True
    """Also judge n-grams by ROUGE-L and edit similarity (greedy generation where needed)."""
    rouge_threshold: float = 0.75
    """ROUGE-L F threshold (the paper's 0.75)."""
    edit_threshold: float = 0.9
    """Edit-similarity threshold (the paper's text: 0.9; its metric_utils.py uses 0.75)."""
    inclusive: bool = False
    """Thresholds with ``>=`` instead of the paper's text's strict ``>``."""
    n_boot: int = 2000
    """Bootstrap resamples for the confidence intervals."""
    seed: int = 0
    """Seed of the bootstrap (and of ``--sample``)."""
    paraphrase_max_tokens: int = 512
    """Token budget of one generated paraphrase."""
    batch_items: int = 16
    """Items per batch (results are saved after each)."""

    def __post_init__(self) -> None:
        check_field_types(self, {"n_boot": "--bootstrap"})
        if not 1 <= self.n <= 64:
            raise ConfigError("--n must be between 1 and 64")
        if not 1 <= self.k <= 100:
            raise ConfigError("--k must be between 1 and 100")
        for name, tpl in (("--ppl-prefix", self.ppl_prefix), ("--ngram-text", self.ngram_text)):
            if "{question}" not in tpl:
                raise ConfigError(f"{name} {tpl!r} must contain {{question}}")
        if "{answer}" not in self.ppl_continuation or "{answer}" not in self.ngram_text:
            raise ConfigError("--ppl-continuation and --ngram-text must contain {answer}")
        for name, thr in (
            ("--rouge-threshold", self.rouge_threshold),
            ("--edit-threshold", self.edit_threshold),
        ):
            if not 0 <= thr <= 1:
                raise ConfigError(f"{name} must be between 0 and 1")
        if self.n_boot < 100:
            raise ConfigError(f"--bootstrap (n_boot) {self.n_boot}: must be at least 100")
        if self.batch_items < 1:
            raise ConfigError("--batch-items must be at least 1")

    def settings(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("batch_items")
        return d

    def fill(self, template: str, question: str, answer: str) -> str:
        return template.replace("{question}", question).replace("{answer}", answer)


@dataclass
class SplitInput:
    """One benchmark split to check, with its reference versions."""

    name: str
    """``test`` or ``train`` (the two the paper compares)."""
    loaded: LoadResult[QAItem]
    items: list[QAItem]
    """The selected items."""
    references: list[ReferenceSet] = field(default_factory=list)

    @classmethod
    def build(
        cls,
        name: str,
        loaded: LoadResult[QAItem],
        items: Sequence[QAItem] | None = None,
        references: Sequence[LoadResult[QAItem] | ReferenceSet] = (),
        *,
        pairing: str = "auto",
    ) -> SplitInput:
        """A split as the command builds it: the paraphrases the file carries itself (a BenBench
        rewritten file) first, then each reference file (from :func:`~contamscope.data.load_qa`,
        named after its source file's stem) paired with its items; ``items`` defaults to all.

        >>> from contamscope.data import load_qa                          # doctest: +SKIP
        >>> test = load_qa("GSM8K_rewritten-test-1.jsonl")                # doctest: +SKIP
        >>> SplitInput.build("test", test).references[0].name             # doctest: +SKIP
        'inline'
        """
        if not isinstance(loaded, LoadResult):
            raise ConfigError(
                f"SplitInput.build({name!r}, loaded): expected a LoadResult (load_qa's), not "
                f"{type(loaded).__name__}; pass a subset of its items as items="
            )
        if isinstance(references, LoadResult | ReferenceSet | str):
            raise ConfigError(
                f"SplitInput.build({name!r}, references=...): a single "
                f"{type(references).__name__}; give a list of them"
            )
        odd = next((r for r in references if not isinstance(r, LoadResult | ReferenceSet)), None)
        if odd is not None:
            raise ConfigError(
                f"SplitInput.build({name!r}, references=...): a {type(odd).__name__} among "
                "them; each is a LoadResult (load_qa's) or a ReferenceSet"
            )
        refs: list[ReferenceSet] = []
        inline = inline_reference(loaded)
        if inline is not None:
            refs.append(inline)
        for r in references:
            if isinstance(r, ReferenceSet):
                refs.append(r)
            else:
                refs.append(pair_reference(loaded, r, name=Path(r.source).stem, pairing=pairing))
        _refuse_repeated(refs, "--reference" if name == "test" else "--train-reference")
        return cls(name, loaded, list(loaded.items if items is None else items), refs)

    def __repr__(self) -> str:
        """One line, as :class:`~contamscope.data.items.LoadResult` prints: counts, not items."""
        refs = ", ".join(repr(r.name) for r in self.references)
        return (
            f"SplitInput(name={self.name!r}, source={self.loaded.source!r}, "
            f"items={len(self.items)}, references=[{refs}])"
        )


def _refuse_repeated(refs: Sequence[ReferenceSet], option: str) -> None:
    """Refuse a reference file whose contents another reference (or the benchmark's own
    inline paraphrases) already gives: its paraphrases would count twice, and the
    randomization test would draw the original 1 time in 3 where it is 1 in 2 (the benchmark's
    rewritten file given again with -r ran so; QA)."""
    seen: dict[str, ReferenceSet] = {}
    for r in refs:
        if r.content_hash is None or r.pairing == "generated":
            continue
        first = seen.setdefault(r.content_hash, r)
        if first is not r:
            what = (
                "the benchmark file itself, whose paraphrases are read already (inline)"
                if first.pairing == "inline"
                else f"the same contents as {first.source}"
            )
            raise ConfigError(f"{option} {r.source}: {what}; give each paraphrase set once")


@dataclass(repr=False)  # Outcome.__repr__: the summary is too long to print
class BenBenchOutcome(Outcome):
    """The result of one run (see :class:`~contamscope.pipeline.outcome.Outcome`)."""


# --------------------------------------------------------------------------- one batch


@dataclass
class _Version:
    name: str
    question: str
    answer: str
    ppl_req: ScoreRequest
    ngram_req: ScoreRequest


def _versions(
    item: QAItem, paras: list[tuple[str, Paraphrase]], cfg: BenBenchConfig
) -> list[_Version]:
    out = []
    texts = [("original", item.question, item.answer or "")]
    texts += [(name, p.question or "", p.answer or "") for name, p in paras if p.ok]
    for name, q, a in texts:
        out.append(
            _Version(
                name,
                q,
                a,
                ScoreRequest(cfg.fill(cfg.ppl_prefix, q, a), cfg.fill(cfg.ppl_continuation, q, a)),
                ScoreRequest("", cfg.fill(cfg.ngram_text, q, a)),
            )
        )
    return out


_PART = "\ufffd"
"""What decoding a token run that ends inside a character's bytes leaves at its end."""


def whole_chars(
    decode: Callable[[Sequence[int]], str], toks: Sequence[int], s: int
) -> tuple[str, str]:
    """The text before token ``s`` and the text of the tokens from ``s``, cut on whole
    characters: a character whose bytes start before ``s`` goes to the second part. Decoding
    the n-gram's tokens alone cut Chinese characters and emoji in two ('\ufffd' in the texts
    the lenient criteria compare, and at the end of the generation prompt).

    >>> whole_chars(lambda t: bytes(t).decode("utf-8", "replace"), list("猫a".encode()), 2)
    ('', '猫a')
    """
    head = decode(toks[:s]).rstrip(_PART)
    full = decode(toks)
    if not full.startswith(head):  # a tokenizer whose prefixes decode otherwise: as before
        return decode(toks[:s]), decode(toks[s:])
    return head, full[len(head) :]


def _ngram_plan(
    st: TokenStats, cfg: BenBenchConfig, decode: Callable[[Sequence[int]], str]
) -> tuple[list[int], list[dict[str, Any]], list[GenerateRequest | None]]:
    toks, greedy = st.tokens, st.greedy
    starts = starting_points(len(toks), n=cfg.n, k=cfg.k)
    partial: list[dict[str, Any]] = []
    gens: list[GenerateRequest | None] = []
    for s in starts:
        miss = first_mismatch(toks, greedy, s, cfg.n)
        # texts on whole characters; a character cut at the n-gram's end is left out of both
        # the original and the prediction alike
        head, original = whole_chars(decode, toks[: s + cfg.n], s)
        original = original.rstrip(_PART)
        predicted: str | None = original if miss is None else None
        gen: GenerateRequest | None = None
        if miss is not None and cfg.lenient:
            if miss == cfg.n - 1:  # only the last token differs: known without generating
                guess = [*toks[: s + cfg.n - 1], greedy[s + cfg.n - 1]]
                predicted = whole_chars(decode, guess, s)[1].rstrip(_PART)
            else:
                gen = GenerateRequest(prompt=head, max_new_tokens=cfg.n)
        partial.append({"start": s, "original": original, "predicted": predicted, "miss": miss})
        gens.append(gen)
    return starts, partial, gens


def _prefetched_decoder(
    backend: Backend, ngram_stats: Sequence[TokenStats], cfg: BenBenchConfig
) -> Callable[[Sequence[int]], str]:
    """``backend.decode`` with the texts the n-gram plans of ``ngram_stats`` ask for decoded
    beforehand, at once (:meth:`Backend.decode_many`: a served model's requests in parallel,
    where they went one after another). The plans are made once with a decoder that only
    records what is asked; a text asked for later that was not foreseen is decoded then."""
    wanted: dict[tuple[int, ...], None] = {}

    def record(tokens: Sequence[int]) -> str:
        wanted[tuple(tokens)] = None
        return ""

    for st in ngram_stats:
        if st.tokens and not st.is_too_long:
            _ngram_plan(st, cfg, record)
    keys = list(wanted)
    texts = dict(zip(keys, backend.decode_many(keys))) if keys else {}

    def decode(tokens: Sequence[int]) -> str:
        got = texts.get(tuple(tokens))
        return got if got is not None else backend.decode(tokens)

    return decode


MAX_NLL = 709.0
"""The largest mean NLL (nats per token) whose perplexity, exp(NLL), a float holds."""


def _exclusion(pst: TokenStats, nst: TokenStats) -> str | None:
    """Why a version (answer text ``pst``, n-gram text ``nst``) cannot be scored, or None."""
    if pst.is_too_long or nst.is_too_long:
        return "longer than the model's context window"
    if not pst.tokens:
        return "no answer tokens"
    # -inf (a token of probability 0) made the perplexity inf and every mean and Delta with
    # it; a NaN in the n-gram pass is a numerical failure whose greedy tokens cannot be trusted
    bad = pst.non_finite() or nst.non_finite(nan_only=True)
    nll = -sum(pst.logprobs) / len(pst.logprobs)
    if bad is None and nll > MAX_NLL:  # (exp of it overflowed: an OverflowError traceback; QA)
        return f"perplexity beyond floating point (mean NLL {nll:.4g} nats per answer token)"
    return bad


def _same_served_model_as_before(
    backend: Backend, records: Iterable[dict[str, Any]], run_dir: RunDir
) -> None:
    """Refuse to resume a run of a served model (``openai:``) whose server now scores the
    first scored record's texts otherwise than the run recorded their perplexity (:mod:`.served`)."""
    for rec in records:
        ppls = [v["ppl"] for v in rec.get("versions") or () if isinstance(v.get("ppl"), dict)]
        if ppls:
            reqs = [ScoreRequest(p["prefix"], p["continuation"]) for p in ppls]
            summed = [-p["nll"] * p["n_tokens"] for p in ppls]
            n = [p["n_tokens"] for p in ppls]
            refuse_changed_server(backend, run_dir, rec["id"], reqs, summed, n, per_token=True)
            return


def _score_batch(
    batch: list[tuple[str, QAItem, list[tuple[str, Paraphrase]]]],
    scorer: CachedScorer,
    cfg: BenBenchConfig,
) -> list[dict[str, Any]]:
    plans = [(split, item, paras, _versions(item, paras, cfg)) for split, item, paras in batch]
    reqs: list[ScoreRequest] = []
    for *_, vs in plans:
        for v in vs:
            reqs.extend([v.ppl_req, v.ngram_req])
    stats = scorer.token_stats(reqs)
    decode = _prefetched_decoder(scorer.backend, stats[1::2], cfg)
    pos = 0
    pending: list[tuple[dict[str, Any], list[dict[str, Any]], list[GenerateRequest | None]]] = []
    records = []
    for split, item, paras, vs in plans:
        rec: dict[str, Any] = {
            "id": f"{split}/{item.id}",
            "item_id": item.id,
            "split": split,
            "source": item.source,
            "line": item.line,
            "subject": item.subject,
            "final_answer": item.meta.get("final_answer"),
            "excluded": None,
            "versions": [],
            "reference_failures": [
                {"reference": name, "reason": p.reason} for name, p in paras if not p.ok
            ],
            "references_unchecked": [name for name, p in paras if p.ok and p.reason],
        }
        for v in vs:
            pst, nst = stats[pos], stats[pos + 1]
            pos += 2
            ver: dict[str, Any] = {"name": v.name, "question": v.question, "answer": v.answer}
            why = _exclusion(pst, nst)
            if why is not None:
                ver["excluded"] = why
                rec["versions"].append(ver)
                continue
            nll, ppl = answer_perplexity(pst.logprobs)
            ver["ppl"] = {
                "prefix": v.ppl_req.prefix,
                "continuation": v.ppl_req.continuation,
                "n_tokens": len(pst.tokens),
                "nll": nll,
                "ppl": ppl,
            }
            if pst.boundary_chars:
                ver["ppl"]["boundary_chars"] = pst.boundary_chars
            starts, partial, gens = _ngram_plan(nst, cfg, decode)
            ver["ngram"] = {
                "text": v.ngram_req.continuation,
                "n_tokens": len(nst.tokens),
                "starts": starts,
            }
            if not starts:
                ver["excluded"] = f"text shorter than n + 2 = {cfg.n + 2} tokens: no n-gram"
            pending.append((ver, partial, gens))
            rec["versions"].append(ver)
        orig = rec["versions"][0]
        if orig.get("excluded"):
            rec["excluded"] = orig["excluded"]
        elif orig["ppl"]["n_tokens"] < cfg.n:
            rec["answer_shorter_than_n"] = True
        records.append(rec)
    # lenient criteria: real greedy generation only where the text is needed
    gen_reqs = [g for _, _, gens in pending for g in gens if g is not None]
    generated = iter(scorer.generate(gen_reqs) if gen_reqs else [])
    for ver, partial, gens in pending:
        results = []
        for p, g in zip(partial, gens):
            generated_now = g is not None
            pred = next(generated).text.rstrip(_PART) if g is not None else p["predicted"]
            results.append(
                NgramResult(
                    start=p["start"],
                    original=p["original"],
                    predicted=pred,
                    exact=p["miss"] is None,
                    mismatch_at=p["miss"],
                    rouge_l=rouge_l_f(pred, p["original"]) if pred is not None else None,
                    edit_sim=edit_similarity(pred, p["original"]) if pred is not None else None,
                    generated=generated_now,
                )
            )
        _aggregate(ver["ngram"], results, cfg)
    for rec in records:
        _item_metrics(rec)
    return records


def _aggregate(ngram: dict[str, Any], results: Sequence[NgramResult], cfg: BenBenchConfig) -> None:
    """A version's n-gram accuracies and instance flags from its starting points, under
    ``cfg``'s thresholds, into its stored ``ngram`` part."""
    agg = ngram_item(
        ngram["n_tokens"],
        results,
        rouge_threshold=cfg.rouge_threshold,
        edit_threshold=cfg.edit_threshold,
        inclusive=cfg.inclusive,
    ).to_dict()
    agg.pop("n_tokens")
    ngram.update(agg)


def _rederive_records(run_dir: RunDir, done: dict[str, dict[str, Any]], cfg: BenBenchConfig) -> int:
    """Re-derive the folder's records' threshold-dependent values (n-gram accuracies, instance
    flags, per-item metrics and Deltas; each n-gram's ROUGE-L from its stored texts, so a run
    resumed or re-analysed under a newer tokenisation is of one) under ``cfg`` from their
    stored n-grams, and rewrite the
    records if any changed; returns how many did. Checked on every open, so a run or a
    re-analysis killed between writing the settings and the records is put right on the next."""
    import json

    changed = 0
    for rec in done.values():
        before = json.dumps(rec, sort_keys=True)
        for ver in rec.get("versions", []):
            ngram = ver.get("ngram")
            if isinstance(ngram, dict) and "results" in ngram:
                for r in ngram["results"]:  # ROUGE-L from the stored texts, by the current
                    pred, orig = r.get("predicted"), r.get("original")  # tokenisation (a
                    if isinstance(pred, str) and isinstance(orig, str):  # Chinese text's
                        r["rouge_l"] = rouge_l_f(pred, orig)  # was 0 before it counted CJK)
                fields = NgramResult.__dataclass_fields__
                results = [NgramResult(**{k: r.get(k) for k in fields}) for r in ngram["results"]]
                _aggregate(ngram, results, cfg)
        if rec.get("versions"):
            _item_metrics(rec)
        changed += json.dumps(rec, sort_keys=True) != before
    if changed:
        run_dir.replace_records(done.values())
    return changed


def _metrics_of(ver: dict[str, Any]) -> dict[str, float | None] | None:
    if ver.get("excluded"):
        return None
    ng = ver["ngram"]
    return {
        "ppl": ver["ppl"]["ppl"],
        "nll": ver["ppl"]["nll"],
        "ngram_exact": ng["exact"],
        "ngram_rouge": ng["rouge"],
        "ngram_edit": ng["edit"],
    }


def _record_key(rec: dict[str, Any]) -> str:
    """The order a record's item takes in the bootstrap: a digest of its original question
    and answer, then its id (which orders only items of identical texts)."""
    vers = rec.get("versions") or [{}]
    text = f"{vers[0].get('question') or ''}\x00{vers[0].get('answer') or ''}"
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{digest}\x00{rec.get('id') or ''}"


def _version_values(rec: dict[str, Any], key: str) -> list[float]:
    """One metric of each of the item's usable paraphrases (those its reference mean uses)."""
    vals = (_metrics_of(v) for v in rec["versions"][1:])
    return [m[key] for m in vals if m is not None and m[key] is not None]  # type: ignore[misc]


def _item_metrics(rec: dict[str, Any]) -> None:
    """Per-item metrics of the original, the mean over its valid paraphrases, and Delta."""
    vers = rec["versions"]
    orig = _metrics_of(vers[0]) if vers else None
    refs = [m for m in (_metrics_of(v) for v in vers[1:]) if m is not None]
    ref = {k: mean_or_none([r[k] for r in refs]) for k in METRICS} if refs else None
    delta = None
    if orig is not None and ref is not None:
        delta = {
            k: (orig[k] - ref[k]) if orig[k] is not None and ref[k] is not None else None  # type: ignore[operator]
            for k in METRICS
        }
    rec["metrics"] = {"original": orig, "reference": ref, "n_references": len(refs), "delta": delta}
    if orig is not None:
        ng = vers[0]["ngram"]
        rec["flags"] = {
            "exact_all": ng["all_exact"],
            "rouge_all": ng["all_rouge"],
            "edit_all": ng["all_edit"],
        }


def _readable(record: dict[str, Any]) -> bool:
    """Whether a stored record is one the summary can read: excluded with its reason, or
    versions whose metrics derive (the original's perplexity with its token count). A record
    without ``versions`` was kept as finished and crashed the resume with a traceback
    (cross-reader QA); such a record is scored again."""
    if record.get("excluded"):
        return isinstance(record["excluded"], str)
    try:
        rec = dict(record)  # (_item_metrics sets its metrics and flags: the stored ones stay)
        versions = rec["versions"]
        if (
            not isinstance(versions, list)
            or not versions
            or not all(isinstance(v, dict) for v in versions)
        ):
            return False
        _item_metrics(rec)
        ppl = versions[0]["ppl"]
        float(ppl["nll"]), int(ppl["n_tokens"])
        return rec["metrics"]["original"] is not None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return False


# --------------------------------------------------------------------------- the run


@releases_run_dir
def run_benbench(
    splits: Sequence[SplitInput],
    scorer: CachedScorer,
    run_dir: RunFolder,
    config: BenBenchConfig,
    *,
    paraphraser: CachedScorer | None = None,
    selection: dict[str, Any] | None = None,
    overwrite: bool = False,
    on_start: Callable[[int, int], None] | None = None,
    on_items: Callable[[int], None] | None = None,
) -> BenBenchOutcome:
    """Score every split's items and their paraphrases; write records and the summary.

    ``paraphraser`` (a generation backend through the cache) adds one generated paraphrase per
    item, checked for its final answer; failures are recorded, not used.
    """
    run_dir = as_run_dir(run_dir)  # (a path: opened by the decorator; for the type)
    if isinstance(splits, SplitInput) or not isinstance(splits, Sequence):
        raise ConfigError(
            f"splits: a {type(splits).__name__}; give a list of SplitInput (SplitInput.build("
            "'test', loaded, ...) for a benchmark from load_qa)"
        )
    wrong = next((s for s in splits if not isinstance(s, SplitInput)), None)
    if wrong is not None:
        raise ConfigError(f"splits: a {type(wrong).__name__} among them; each is a SplitInput")
    if not splits:
        raise ConfigError("give at least one split (SplitInput) to run BenBench on")
    names = [s.name for s in splits]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:  # its items would be scored and counted twice under one name
        raise ConfigError(f"split {twice!r} is given {names.count(twice)} times; give it once")
    for s in splits:
        check_items(s.items, QAItem, "BenBench (load_qa)", f"split {s.name}")
        check_from(s.items, s.loaded, f"split {s.name}")
    backend = scorer.backend
    counted = scorer.mark()
    check_backend(
        backend,
        prompt_logprobs=True,
        token_stats=True,
        from_start=True,
        decode=True,
        method="BenBench",
    )
    if config.lenient:
        check_backend(
            backend,
            generate=True,
            method="BenBench's lenient n-gram criteria (the default; lenient=False leaves them out)",
        )
    if paraphraser is not None:
        check_backend(paraphraser.backend, generate=True, method="--paraphraser")
        if without_chat_template(paraphraser.backend):
            note(
                f"--paraphraser {paraphraser.backend.spec} has no chat template (a base model): "
                "the request to paraphrase is given to it as plain text, which a base model may "
                "continue rather than answer (each reply is checked; those that are no "
                "paraphrase are left out and counted)"
            )
    settings = {
        "method": "benbench",
        "run_schema": RUN_SCHEMA_VERSION,
        "model": backend.spec,
        "model_fingerprint": scorer.fingerprint,
        "paraphraser": None if paraphraser is None else paraphraser.backend.spec,
        "paraphraser_fingerprint": None if paraphraser is None else paraphraser.fingerprint,
        "splits": {
            s.name: {
                "benchmark": recorded_source(s.loaded.source),
                "benchmark_hash": s.loaded.content_hash,
                "references": [
                    [
                        recorded_source(r.source) if r.content_hash else r.source,
                        r.content_hash,
                        r.pairing,
                    ]
                    for r in s.references
                ],
            }
            for s in splits
        },
        "selection": selection_settings(
            None,
            [f"{s.name}/{it.id}" for s in splits for it in s.items],
            selection,
            {s.name: len(s.items) for s in splits},  # per split, as the command (library QA)
        ),
        "config": config.settings(),
    }
    renamed = scorer.renamed | (paraphraser.renamed if paraphraser is not None else {})
    stored = None if overwrite else run_dir.stored_settings(renamed)
    old, new = (stored or {}).get("selection") or {}, settings["selection"]
    assert isinstance(new, dict)  # (selection_settings makes one)
    if (
        isinstance(old, dict)
        and not old.get("sample")
        and not new.get("sample")
        and "seed" in old
        and "seed" in new
    ):
        # without --sample the seed selects nothing (the items' digest says they are the
        # same): another --seed is the bootstrap's, an analysis setting, not another run (QA)
        new["seed"] = old["seed"]
    done = run_dir.open(
        settings,
        overwrite=overwrite,
        upgrades=analysis_upgrade(stored, settings, ANALYSIS_ONLY),
        complete=_readable,
        renamed=renamed,
    )
    _rederive_records(run_dir, done, config)
    wanted = [(s.name, it) for s in splits for it in s.items]
    ids = {f"{name}/{it.id}" for name, it in wanted}
    done = {k: v for k, v in done.items() if k in ids}
    todo = [(name, it) for name, it in wanted if f"{name}/{it.id}" not in done]
    if todo and done:
        _same_served_model_as_before(scorer.backend, done.values(), run_dir)
    refs_of = {s.name: s.references for s in splits}
    if on_start is not None:
        on_start(len(wanted), len(done))
    t0 = time.perf_counter()
    scored_now = 0
    gen_name = None if paraphraser is None else f"generated:{paraphraser.backend.spec}"
    for b in range(0, len(todo), config.batch_items):
        chunk = todo[b : b + config.batch_items]
        paras: list[list[tuple[str, Paraphrase]]] = [
            [(r.name, r.pairs[it.id]) for r in refs_of[name] if it.id in r.pairs]
            for name, it in chunk
        ]
        if paraphraser is not None and gen_name is not None:
            reqs = [
                GenerateRequest(
                    paraphrase_prompt(it.question, it.answer or ""),
                    max_new_tokens=config.paraphrase_max_tokens,
                    chat=True,
                )
                for _, it in chunk
            ]
            for plist, (_, it), g in zip(paras, chunk, paraphraser.generate(reqs)):
                p = Paraphrase.from_reply(g.text, it.answer or "")
                if g.finish_reason == "length" and not p.ok:
                    p = Paraphrase(
                        p.question,
                        p.answer,
                        False,
                        p.reason + f" (reply cut at {config.paraphrase_max_tokens} tokens)",
                    )
                plist.append((gen_name, p))
        batch = [(name, it, plist) for (name, it), plist in zip(chunk, paras)]
        records = _score_batch(batch, scorer, config)
        for rec, plist in zip(records, paras):
            gen = [p for name, p in plist if name == gen_name]
            if gen:
                rec["generated_paraphrase"] = {
                    "question": gen[0].question,
                    "answer": gen[0].answer,
                    "ok": gen[0].ok,
                    "reason": gen[0].reason,
                }
        run_dir.append(records)
        for r in records:
            done[r["id"]] = r
        scored_now += len(chunk)
        if on_items is not None:
            on_items(len(chunk))
    elapsed = time.perf_counter() - t0
    computed, reused = scorer.since(counted)
    ordered = [done[f"{name}/{it.id}"] for name, it in wanted if f"{name}/{it.id}" in done]
    timing = {
        "scoring_seconds": round(elapsed, 3),
        "items_scored_now": scored_now,
        "items_resumed": len(wanted) - scored_now,
        "items_per_second": round(scored_now / elapsed, 3) if elapsed > 0 and scored_now else None,
        "requests_computed": computed,
        "requests_from_cache": reused,
    }
    timing = run_dir.with_earlier_timings(timing, scorer.backend.describe())
    summary = build_summary(splits, ordered, settings, config, scorer, paraphraser, timing)
    run_dir.write_summary(summary)
    return BenBenchOutcome(summary, run_dir.path, scored_now, len(wanted) - scored_now)


# --------------------------------------------------------------------------- summary


def _split_stats(records: list[dict[str, Any]], cfg: BenBenchConfig) -> dict[str, Any]:
    ok = [r for r in records if not r.get("excluded")]
    orig = [r["metrics"]["original"] for r in ok]
    tok_nll = sum(r["versions"][0]["ppl"]["nll"] * r["versions"][0]["ppl"]["n_tokens"] for r in ok)
    tok_n = sum(r["versions"][0]["ppl"]["n_tokens"] for r in ok)
    out: dict[str, Any] = {
        "n_items": len(ok),
        "original": {k: mean_or_none([m[k] for m in orig]) for k in METRICS},
        "ppl_token_weighted": math.exp(tok_nll / tok_n) if tok_n else None,
    }
    paired = [r for r in ok if r["metrics"]["reference"] is not None]
    out["n_paired"] = len(paired)
    out["reference"] = (
        {k: mean_or_none([r["metrics"]["reference"][k] for r in paired]) for k in METRICS}
        if paired
        else None
    )
    deltas = {}
    for k in METRICS:
        use = [
            r
            for r in paired
            if r["metrics"]["original"][k] is not None and r["metrics"]["reference"][k] is not None
        ]
        orig_k = [r["metrics"]["original"][k] for r in use]
        keys = [_record_key(r) for r in use]  # resampled in the order of the items' texts
        deltas[k] = delta_stats(
            orig_k,
            [r["metrics"]["reference"][k] for r in use],
            n_boot=cfg.n_boot,
            seed=cfg.seed,
            keys=keys,
        )
        deltas[k].update(
            paraphrase_test(
                orig_k,
                [_version_values(r, k) for r in use],
                lower_is_familiar=k in LOWER_IS_FAMILIAR,
                keys=keys,
            )
        )
    out["delta"] = deltas
    inst: dict[str, Any] = {}
    for crit in ("exact_all", "rouge_all", "edit_all"):
        hit = [r for r in ok if r["flags"].get(crit)]
        known = [r for r in ok if r["flags"].get(crit) is not None]
        ref_known = [v for r in ok for v in r["versions"][1:] if not v.get("excluded")]
        key = {"exact_all": "all_exact", "rouge_all": "all_rouge", "edit_all": "all_edit"}[crit]
        inst[crit] = {
            "count": len(hit),
            "of": len(known),
            "items": [r["id"] for r in hit],
            "reference_count": sum(1 for v in ref_known if v["ngram"].get(key)),
            "reference_of": sum(1 for v in ref_known if v["ngram"].get(key) is not None),
        }
    out["instances"] = inst
    return out


def _reason_kind(reason: str) -> str:
    """A failure reason without its item-specific details (for counting)."""
    return (
        reason.split(":")[0] if reason.startswith("final answer changed") else reason.split(" (")[0]
    )


def build_summary(
    splits: Sequence[SplitInput],
    records: Sequence[dict[str, Any]],
    settings: dict[str, Any],
    config: BenBenchConfig,
    scorer: CachedScorer,
    paraphraser: CachedScorer | None,
    timing: dict[str, Any],
) -> dict[str, Any]:
    """summary.json: provenance, counts, per-split metrics, Deltas and instance-level flags."""
    return _summary(
        _split_facts(splits),
        records,
        settings,
        config,
        scorer.backend.describe(),
        None if paraphraser is None else paraphraser.backend.describe(),
        timing,
    )


_READ_COUNTS = ("items_loaded", "rows_skipped", "reference_rows_skipped")
"""A split's counts that come from reading its files, not from the records."""


def _split_facts(splits: Sequence[SplitInput]) -> dict[str, Any]:
    """What a summary says of the splits' files (``benchmark``, the counts of rows read and
    skipped, ``skipped_rows``), in the splits' order: a re-analysis takes them from the run's
    summary instead of reading the files again."""
    benchmarks: dict[str, Any] = {}
    read: dict[str, Any] = {}
    for s in splits:
        ids = [it.id for it in s.items]
        benchmarks[s.name] = {
            "source": s.loaded.source,
            "format": s.loaded.format,
            "content_hash": s.loaded.content_hash,
            "files": len(s.loaded.files),
            "references": [r.describe(ids) for r in s.references],
        }
        read[s.name] = {
            "items_loaded": len(s.loaded.items),
            "rows_skipped": len(s.loaded.problems),
            "reference_rows_skipped": sum(len(r.skipped_rows) for r in s.references),
        }
    skipped = {
        s.name: [str(p) for p in s.loaded.problems]
        + [row for r in s.references for row in r.skipped_rows]
        for s in splits
    }
    return {"benchmark": benchmarks, "read": read, "skipped_rows": skipped}


def _summary(
    facts: dict[str, Any],
    records: Sequence[dict[str, Any]],
    settings: dict[str, Any],
    config: BenBenchConfig,
    model: dict[str, Any],
    paraphraser: dict[str, Any] | None,
    timing: dict[str, Any],
) -> dict[str, Any]:
    """The summary from the records and the splits' :func:`_split_facts` (``model``,
    ``paraphraser``: the backends' ``describe()``)."""
    by_split: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_split.setdefault(r["split"], []).append(r)
    stats: dict[str, Any] = {"splits": {}}
    counts: dict[str, Any] = {}
    for name in facts["benchmark"]:
        recs = by_split.get(name, [])
        stats["splits"][name] = _split_stats(recs, config)
        failures = Counter(_reason_kind(f["reason"]) for r in recs for f in r["reference_failures"])
        read = facts["read"][name]
        counts[name] = {
            "items_loaded": read["items_loaded"],
            "items_selected": len(recs),
            "items_analysed": sum(1 for r in recs if not r.get("excluded")),
            "excluded": dict(
                Counter(r["excluded"].split(":")[0] for r in recs if r.get("excluded"))
            ),
            "rows_skipped": read["rows_skipped"],
            "reference_rows_skipped": read["reference_rows_skipped"],
            "answer_shorter_than_n": sum(1 for r in recs if r.get("answer_shorter_than_n")),
            "items_without_reference": sum(
                1 for r in recs if not r.get("excluded") and r["metrics"]["n_references"] == 0
            ),
            "paraphrase_failures": dict(failures),
            "paraphrases_unchecked": sum(len(r.get("references_unchecked", [])) for r in recs),
        }
    tr, te = stats["splits"].get("train"), stats["splits"].get("test")
    if tr and te:
        dtt: dict[str, Any] = {}
        for k in METRICS:

            def pairs(split: str, key: str = k) -> tuple[list[float], list[float]]:
                rs = [
                    r
                    for r in by_split.get(split, [])
                    if not r.get("excluded")
                    and r["metrics"]["reference"] is not None
                    and r["metrics"]["original"][key] is not None
                    and r["metrics"]["reference"][key] is not None
                ]
                return (
                    [r["metrics"]["original"][key] for r in rs],
                    [r["metrics"]["reference"][key] for r in rs],
                )

            tr_k, te_k = pairs("train"), pairs("test")
            dtt[k] = delta_train_test(tr_k, te_k, n_boot=config.n_boot, seed=config.seed)
            dtt[k]["p_value"] = split_label_p(
                [o - r for o, r in zip(*tr_k, strict=True)],
                [o - r for o, r in zip(*te_k, strict=True)],
                seed=config.seed,
            )
        stats["delta_train_test"] = dtt
    else:
        stats["delta_train_test"] = None
    summary = {
        "schema": SCHEMA,
        "method": "benbench",
        "contamscope_version": __version__,
        "git_commit": git_commit(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "model": model,
        "paraphraser": paraphraser,
        "benchmark": facts["benchmark"],
        "selection": settings["selection"],
        "config": settings["config"],
        "metrics": METRICS,
        "counts": counts,
        "skipped_rows": facts["skipped_rows"],
        "excluded_items": [
            {"id": r["id"], "reason": r["excluded"]} for r in records if r.get("excluded")
        ],
        "paraphrase_failures": [
            {"id": r["id"], **f} for r in records for f in r["reference_failures"]
        ],
        "statistics": stats,
        "timings": timing,
        "versions": package_versions(),
    }
    summary["verdict"] = printed_verdict(summary)  # (the report's and the terminal's line)
    return summary


# --------------------------------------------------------------------------- re-analysis


@releases_run_dir
def reanalyse_benbench(run_dir: RunFolder, **analysis: Unpack[BenBenchAnalysis]) -> BenBenchOutcome:
    """Analyse a finished BenBench run again from its stored records: no model, no data,
    nothing scored or generated. ``analysis`` takes :data:`ANALYSIS_ONLY` fields
    (``rouge_threshold``, ``edit_threshold``, ``inclusive``, ``n_boot``, ``seed``: the
    bootstrap's); None keeps the run's value. The records' n-gram accuracies, flags and Deltas,
    ``settings.json`` and ``summary.json`` are rewritten; the summary keeps the model, data and
    timings of the run that scored the items. The thresholds of a ``--no-lenient`` run are
    refused (its n-grams were never generated). ``run_dir`` may be a folder path.

    >>> reanalyse_benbench("runs/benbench-gsm8k", edit_threshold=0.75)  # doctest: +SKIP
    """
    run_dir = as_run_dir(run_dir)  # (a path: opened by the decorator; for the type)
    from ..errors import StoreError

    unknown = sorted(set(analysis) - set(ANALYSIS_ONLY))
    if unknown:
        raise ConfigError(f"BenBench's analysis has no setting {unknown[0]!r}")
    stored, old = run_dir.finished_run("benbench")
    cfg = stored["config"]
    given = {k: v for k, v in analysis.items() if v is not None}
    lenient_only = [k for k in ("rouge_threshold", "edit_threshold", "inclusive") if k in given]
    if lenient_only and not cfg.get("lenient", True):
        flag = "--" + lenient_only[0].replace("_", "-")
        raise ConfigError(
            f"{flag}: {run_dir.path} was run with --no-lenient, so it holds no ROUGE-L or edit "
            "similarity to compare with a threshold (re-run it with --lenient)"
        )
    known = {f for f in BenBenchConfig.__dataclass_fields__ if f != "batch_items"}
    config = BenBenchConfig(**{k: v for k, v in cfg.items() if k in known} | given)
    settings = stored | {"config": cfg | {k: getattr(config, k) for k in ANALYSIS_ONLY}}
    done = run_dir.open(stored, complete=_readable, mend=False)  # nothing written before the checks
    try:
        counts = old["counts"]
        facts = {
            "benchmark": old["benchmark"],
            "read": {name: {k: counts[name].get(k, 0) for k in _READ_COUNTS} for name in counts},
            "skipped_rows": old.get("skipped_rows") or {},
        }
        place = {name: i for i, name in enumerate(facts["benchmark"])}
        wanted = sum(int(c["items_selected"]) for c in counts.values())
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise StoreError(
            f"{run_dir.path}/summary.json: not a complete BenBench summary ({exc})"
        ) from None
    records = sorted(
        (r for r in done.values() if r.get("split") in place), key=lambda r: place[r["split"]]
    )
    if len(records) < wanted:
        raise StoreError(
            f"{run_dir.path} holds {len(records)} of its {wanted} items; re-run its benbench "
            "command to finish it"
        )
    # the records first: a run killed before the settings are written is put right on the
    # next open, which derives the records again under the settings
    with run_dir.reanalysing(analysis):  # (left when a write below fails or is killed)
        changed = _rederive_records(run_dir, done, config)
        run_dir.write_settings(settings)
        timing = dict(old.get("timings") or {}) | {"reanalysed_records": changed}
        summary = _summary(
            facts,
            records,
            settings,
            config,
            old.get("model") or {},
            old.get("paraphraser"),
            timing,
        )
        run_dir.write_summary(summary)
    return BenBenchOutcome(summary, run_dir.path, 0, len(records))
