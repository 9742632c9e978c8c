"""CAP pipeline on the tiny random model: records, summary, resume, every task."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from contamscope.backends.base import (
    Backend,
    Capabilities,
    GenerateRequest,
    Generation,
    ScoreRequest,
    ScoreResult,
)
from contamscope.data.cap import CapFields, load_cap
from contamscope.errors import ConfigError, ModelError, StoreError
from contamscope.pipeline.cap import (
    CapConfig,
    analysis_config,
    build_cap_summary,
    reanalyse_cap,
    run_cap,
)
from contamscope.store import CachedScorer, RunDir, ScoreCache


class StubEmbedder:
    """Similarity = 1 for identical texts, else a fixed value (no model)."""

    def __init__(self, other: float) -> None:
        self.other = other

    def describe(self) -> dict[str, Any]:
        return {"stub": self.other}

    def similarity(self, a: Sequence[str], b: Sequence[str]) -> list[float]:
        return [1.0 if x == y else self.other for x, y in zip(a, b)]


class TextOnlyBackend(Backend):
    """A black-box backend: generation only, echoes a fixed rewrite of the last line."""

    spec = "fake:text-only"
    capabilities = Capabilities(prompt_logprobs=False, generate=True)

    def fingerprint(self) -> str:
        return "fake-text-only-1"

    def score(self, requests: Sequence[ScoreRequest], progress: Any = None) -> list[ScoreResult]:
        raise AssertionError("a black-box backend is never asked for log-probs")

    def generate(
        self, requests: Sequence[GenerateRequest], progress: Any = None
    ) -> list[Generation]:
        out = []
        for r in requests:
            lines = [x for x in r.prompt.splitlines() if x.strip() and not x.rstrip().endswith(":")]
            last = lines[-1] if lines else ""
            out.append(Generation(f"{last} (rewritten)", 5, "stop"))
        return out


def _scorer(backend: Any, tmp_path: Path) -> CachedScorer:
    return CachedScorer(backend, ScoreCache(tmp_path / "cache.sqlite"))


def test_mcq_pairs_records_summary_resume(
    fineval_dir: Path, tiny_backend: Any, tmp_path: Path
) -> None:
    data = load_cap(str(fineval_dir), ["dev", "val"])
    cfg = CapConfig(task="mcq", n_boot=200)
    sel = {s: data.splits[s].items for s in ("dev", "val")}
    run = RunDir(tmp_path / "run")
    out = run_cap(data, sel, _scorer(tiny_backend, tmp_path), run, cfg)
    s = out.summary
    assert s["schema"] == "contamscope.cap.summary/1" and s["method"] == "cap"
    assert s["model"]["spec"] == tiny_backend.spec and s["benchmark"]["task"] == "mcq"
    assert s["benchmark"]["selection"]["n_items"] == {"dev": 3, "val": 3}  # per split (command)
    recs = [json.loads(x) for x in (tmp_path / "run" / "items.jsonl").read_text().splitlines()]
    assert len(recs) == 6 and recs[0]["id"] == "dev/ori_dev-1"
    r = recs[0]
    assert r["input"].startswith("请回答") and r["modified_options"] == ["4", "3", "2", "1"]
    assert r["modification"] == {"kind": "factual", "supplied": True}
    for r in recs:  # M and C follow from the stored predictions
        assert r["m"] == float(r["choice"] == r["answer"])
        same = (
            r["choice"] is not None
            and r["modified_choice"] is not None
            and (r["options"][r["choice"]] == r["modified_options"][r["modified_choice"]])
        )
        assert r["c"] == float(same)
        assert len(r["loglik"]["original"]) == 4
    dev = s["statistics"]["generate"]["splits"]["dev"]
    assert dev["n"] == 3 and dev["m"] == pytest.approx(sum(r["m"] for r in recs[:3]) / 3)
    assert "loglik" in s["statistics"]
    comp = s["statistics"]["generate"]["comparisons"][0]
    assert comp["reference"] == "dev" and comp["other"] == "val"
    assert comp["pcr_diff"] == pytest.approx(
        dev["pcr"] - s["statistics"]["generate"]["splits"]["val"]["pcr"]
    )
    assert s["verdict"]["label"] in (
        "no evidence",
        "likely fine-tuned on dev",
        "likely contaminated by val",
        "inconclusive",
    )
    # inconclusive exactly when a split had no right and no consistent answer (M = C = 0)
    blank = [
        v["n"] and not (v["m"] or v["c"]) for v in s["statistics"]["generate"]["splits"].values()
    ]
    assert (s["verdict"]["label"] == "inconclusive") == any(blank)
    assert "tanh/alpha=0.1" in s["statistics"]["generate"]["ablation"]
    # resume: nothing generated again; a new run on the same cache reuses every generation
    again = run_cap(data, sel, _scorer(tiny_backend, tmp_path), run, cfg)
    assert again.scored_now == 0 and again.resumed == 6
    assert [t["items_now"] for t in again.summary["timings"]["earlier"]] == [6]  # first run's
    assert again.summary["timings"]["earlier"][0]["executor"] == "local"  # where it ran
    assert again.generated_now == 0  # the earlier name still answers
    scorer = _scorer(tiny_backend, tmp_path)
    run_cap(data, sel, scorer, RunDir(tmp_path / "run2"), cfg)
    assert scorer.computed == 0 and scorer.reused > 0
    # re-analysis from records with another alpha / scale, no model
    re = build_cap_summary(
        recs,
        CapConfig(task="mcq", alpha=0.1, scale="linear", n_boot=200),
        splits=["dev", "val"],
        provenance={},
    )
    assert re["statistics"]["generate"]["splits"]["dev"]["m"] == dev["m"]


def test_mcq_generated_reorder_and_missing_answers(
    fineval_dir: Path, tiny_backend: Any, tmp_path: Path
) -> None:
    import dataclasses

    data = load_cap(str(fineval_dir), ["dev", "test"])
    cfg = CapConfig(task="mcq", loglik=False, n_boot=200)
    sel = {s: data.splits[s].items[:2] for s in ("dev", "test")}
    # a split without any reference answer: its M is undefined, refused before any work (the
    # run used to end "inconclusive", blaming the other split)
    with pytest.raises(ConfigError, match="split 'test' has no reference answers"):
        run_cap(data, sel, _scorer(tiny_backend, tmp_path), RunDir(tmp_path / "r"), cfg)
    # one answer missing: that item is generated for but not analysed
    test_items = [dataclasses.replace(it, answer=0) for it in data.splits["test"].items]
    test_items[1] = dataclasses.replace(test_items[1], answer=None)
    data.splits["test"] = dataclasses.replace(data.splits["test"], items=test_items)
    sel = {"dev": data.splits["dev"].items[:2], "test": test_items[:2]}
    out = run_cap(data, sel, _scorer(tiny_backend, tmp_path), RunDir(tmp_path / "r"), cfg)
    recs = [json.loads(x) for x in (tmp_path / "r" / "items.jsonl").read_text().splitlines()]
    test = [r for r in recs if r["split"] == "test"]
    assert all(r["modification"]["supplied"] is False and r["modification"]["order"] for r in test)
    assert [r["m"] is None for r in test] == [False, True]
    assert out.summary["counts"]["test"]["no_reference"] == 1
    assert out.summary["statistics"]["generate"]["splits"]["test"]["n"] == 1
    assert "loglik" not in out.summary["statistics"]


def test_qa_year_shift(qa_file: Path, tiny_backend: Any, tmp_path: Path) -> None:
    data = load_cap(
        str(qa_file),
        ["train", "test"],
        fields=CapFields.parse("input=question,output=answer,split=part"),
    )
    sel = {s: data.splits[s].items for s in ("train", "test")}
    out = run_cap(
        data,
        sel,
        _scorer(tiny_backend, tmp_path),
        RunDir(tmp_path / "q"),
        CapConfig(task="qa", year_shift=34, max_new_tokens=6, n_boot=200),
    )
    recs = [json.loads(x) for x in (tmp_path / "q" / "items.jsonl").read_text().splitlines()]
    assert recs[0]["modified_input"] == "Sales were 5 in 2052 and 8 in 2053. What was the change?"
    flagged = [r for r in recs if r["excluded"]]
    assert [r["item_id"] for r in flagged] == ["qa-3"]
    assert flagged[0]["modified_reference"] == "2053"
    c = out.summary["counts"]["train"]
    assert c["answer_changing"] == 1 and c["analysed"] == 2
    from contamscope.detectors.cap import jaccard, rouge_l

    r = recs[0]
    assert r["m"] == pytest.approx(rouge_l(r["prediction"], "3"))
    assert r["c"] == pytest.approx(jaccard(r["prediction"], r["modified_prediction"]))
    assert out.summary["config"]["year_shift"] == 34
    # every answer empty (the instruct model of the Python guide's example, without its chat
    # template): the verdict says why, where it read a bare 'inconclusive' (docs journey)
    blank = [r | {"prediction": "", "modified_prediction": ""} for r in recs]
    cfg = CapConfig(task="qa", n_boot=100)
    answers = 2 * sum("prediction" in r for r in recs)  # original and modified, per item
    hint = f"all {answers} answers generated are empty: an instruct model without its chat"
    for given, chat, said in ((blank, False, True), (blank, True, False), (recs, False, False)):
        again = build_cap_summary(
            given, replace(cfg, chat=chat), splits=["train", "test"], provenance={}
        )
        assert (hint in again["verdict"]["reasoning"]) == said, (chat, again["verdict"])
    assert analysis_config({"config": {"chat": True}, "task": "qa"}).chat  # reanalyse keeps it


def test_chat_is_refused_for_a_model_without_a_chat_template(
    qa_file: Path, tiny_backend: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run recorded chat: true and gave plain prompts (the bundled Gemma 3 has no
    template; Gemma QA)."""
    data = load_cap(
        str(qa_file),
        ["train", "test"],
        fields=CapFields.parse("input=question,output=answer,split=part"),
    )
    sel = {s: data.splits[s].items for s in ("train", "test")}
    monkeypatch.setattr(tiny_backend.tokenizer, "chat_template", None)
    with pytest.raises(
        ConfigError, match=r"^--chat: hf:\S+ has no chat template .*leave --chat out$"
    ):
        run_cap(
            data,
            sel,
            _scorer(tiny_backend, tmp_path),
            RunDir(tmp_path / "q"),
            CapConfig(task="qa", max_new_tokens=4, chat=True),
        )
    assert not (tmp_path / "q" / "items.jsonl").exists()


def test_summary_paraphrase_threshold(tmp_path: Path) -> None:
    backend = TextOnlyBackend()
    rows = [
        {
            "input": f"Summarize.\nContext:Revenue was {i} million. Costs fell.",
            "output": "x " * 150,
            "split": s,
        }
        for i, s in enumerate(["train", "train", "test", "test"])
    ]
    p = tmp_path / "s.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    data = load_cap(str(p), ["train", "test"])
    assert data.task == "summary"
    sel = {s: data.splits[s].items for s in ("train", "test")}
    cfg = CapConfig(task="summary", max_new_tokens=4, n_boot=200)
    low = run_cap(
        data,
        sel,
        _scorer(backend, tmp_path),
        RunDir(tmp_path / "a"),
        cfg,
        embedder=StubEmbedder(0.5),
    )
    assert low.summary["counts"]["train"]["excluded"] == {"paraphrase similarity below 0.98": 2}
    high = run_cap(
        data,
        sel,
        _scorer(backend, tmp_path),
        RunDir(tmp_path / "b"),
        cfg,
        embedder=StubEmbedder(0.99),
    )
    recs = [json.loads(x) for x in (tmp_path / "b" / "items.jsonl").read_text().splitlines()]
    assert (
        recs[0]["modified_input"]
        == "Summarize.\nContext:Revenue was 0 million. Costs fell. (rewritten)"
    )
    assert all(r["modification"]["similarity"] == 0.99 for r in recs)
    assert high.summary["counts"]["train"]["paraphrases"] == {"generated": 2, "kept": 2}
    for r in recs:  # C: 1 when the two predictions agree (stub: identical, or 0.99 > 0.95)
        assert r["similarity"] in (1.0, 0.99)
    assert high.summary["statistics"]["generate"]["splits"]["train"]["c"] == 1.0


def test_real_embedder_similarity() -> None:
    pytest.importorskip("transformers")
    from contamscope.embed import SentenceEmbedder
    from contamscope.errors import ConfigError

    try:
        emb = SentenceEmbedder()
    except ConfigError as e:
        pytest.skip(str(e))
    sims = emb.similarity(
        ["Revenue rose 7% in the quarter.", "Revenue rose 7% in the quarter.", "", "a"],
        ["Quarterly sales increased by 7%.", "The weather is cold in Oslo.", "", ""],
    )
    assert sims[0] > 0.6 > sims[1] and sims[2] == 1.0 and sims[3] == 0.0
    assert emb.similarity(["same text"], ["same text"])[0] == pytest.approx(1.0, abs=1e-5)


def test_black_box_mcq(fineval_dir: Path, tmp_path: Path) -> None:
    data = load_cap(str(fineval_dir), ["dev", "val"])
    sel = {s: data.splits[s].items for s in ("dev", "val")}
    out = run_cap(
        data,
        sel,
        _scorer(TextOnlyBackend(), tmp_path),
        RunDir(tmp_path / "bb"),
        CapConfig(task="mcq", n_boot=200),
    )
    counts = out.summary["counts"]["dev"]
    assert counts["unmapped"] == {"original": 3, "modified": 3} and counts["unmapped_rate"] == 1.0
    assert "loglik" not in out.summary["statistics"]
    assert out.summary["statistics"]["generate"]["splits"]["dev"]["c"] == 0.0


def test_prompt_past_the_context_window_is_excluded_not_read_as_option_a(
    fineval_dir: Path, tiny_backend: Any, tmp_path: Path
) -> None:
    """The tiny model has 512 positions: a FinEval item made longer is not generated on (was an
    IndexError on a model with fewer positions, or silent generation past them) and its NaN
    option log-likelihoods are not read as choosing A (they were, and were written as NaN)."""
    assert tiny_backend.max_length == 512
    data_dir = fineval_dir / "data"
    for kind in ("ori", "mod"):
        rows = json.loads((data_dir / f"{kind}_dev.json").read_text(encoding="utf-8"))
        rows[0]["input"] = rows[0]["input"].replace("1+1", "1+1" + "很长的问题" * 200)
        (data_dir / f"{kind}_dev.json").write_text(json.dumps(rows, ensure_ascii=False), "utf-8")
    data = load_cap(str(fineval_dir), ["dev", "val"])
    cfg = CapConfig(task="mcq", n_boot=100)
    sel = {s: data.splits[s].items for s in ("dev", "val")}
    out = run_cap(data, sel, _scorer(tiny_backend, tmp_path), RunDir(tmp_path / "run"), cfg)

    def no_nan(x: str) -> float:
        raise AssertionError(f"{x} in items.jsonl")

    text = (tmp_path / "run" / "items.jsonl").read_text().splitlines()
    recs = [json.loads(x, parse_constant=no_nan) for x in text]
    long = recs[0]
    assert long["id"] == "dev/ori_dev-1"
    assert long["excluded"] == "longer than the model's context window"
    assert long["finish_reasons"] == ["context", "context"] and "loglik" not in long
    assert all(r["excluded"] is None and "loglik" in r for r in recs[1:])
    counts = out.summary["counts"]["dev"]
    assert counts["excluded"] == {"longer than the model's context window": 1}
    # the counts of answers are of those generated: the item left out unasked was counted as
    # an empty and unmapped answer twice (output-files QA)
    gen = [r for r in recs if r["split"] == "dev" and not r["excluded"]]
    assert len(gen) == 2
    empty = {
        side: sum(1 for r in gen if not r[key].strip())
        for side, key in (("original", "prediction"), ("modified", "modified_prediction"))
    }
    assert counts["empty_predictions"] == empty
    assert counts["unmapped"] == {
        "original": sum(1 for r in gen if r["choice"] is None),
        "modified": sum(1 for r in gen if r["modified_choice"] is None),
    }
    assert set(counts["truncated_by_version"]) == {"original", "modified"}
    assert isinstance(counts["truncated_predictions"], int)  # (a number, as summaries had it)
    assert out.summary["statistics"]["generate"]["splits"]["dev"]["n"] == 2
    assert out.summary["statistics"]["loglik"]["splits"]["dev"]["n"] == 2


def test_three_splits_are_one_family_holm_adjusted() -> None:
    """With train, dev and test, CAP makes two comparisons; each at 5% let a verdict name a
    split in up to 10% of clean runs. The verdicts now use Holm-adjusted p-values."""
    import numpy as np

    from contamscope.detectors.cap import holm
    from contamscope.pipeline.cap import _reader_stats

    cfg = CapConfig(n_boot=2000)
    train = [(1.0, 1.0, 1.0)] * 10 + [(1.0, 1.0, 0.0)] * 4 + [(0.0, 0.0, 1.0)] * 6
    dev = [(1.0, 1.0, 1.0)] * 4 + [(1.0, 1.0, 0.0)] * 2 + [(0.0, 0.0, 1.0)] * 14
    alone = _reader_stats({"train": train, "dev": dev}, ["train", "dev"], cfg)["comparisons"]
    assert alone[0]["p_adjusted"] is None
    assert alone[0]["verdict"] == "fine-tuned on train" and 0.025 < alone[0]["p_value"] < 0.05
    rows = {"train": train, "dev": dev, "test": list(train)}
    both = _reader_stats(rows, ["train", "dev", "test"], cfg)["comparisons"]
    assert [c["p_value"] for c in both][0] == alone[0]["p_value"]  # same seed, same raw p
    assert [c["p_adjusted"] for c in both] == holm([c["p_value"] for c in both])
    assert both[0]["ci_low"] > 0 and both[0]["p_adjusted"] > 0.05
    assert both[0]["verdict"] == "no evidence" and "Holm-adjusted" in both[0]["reasoning"]
    # clean runs of three splits (12 items each): a verdict names a split in at most 5%
    rng = np.random.default_rng(11)
    cheap = CapConfig(n_boot=200)
    named = 0
    reps = 200
    for _ in range(reps):
        data = {
            s: [(float(m), float(m), float(c)) for m, c in rng.random((12, 2)) < (0.6, 0.5)]
            for s in ("train", "dev", "test")
        }
        comps = _reader_stats(data, ["train", "dev", "test"], cheap)["comparisons"]
        named += any(c["verdict"] != "no evidence" for c in comps)
    assert named / reps <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / reps)


def test_items_left_unmodified_are_out_of_pcr_unless_asked(
    tiny_backend: Any, tmp_path: Path
) -> None:
    """An item whose modified input equals its original (a qa input with no year; AlphaFin
    research's supplied mods, 416 of 1,000) is consistent by construction: it raised every
    split's C and PCR and tested nothing. Left out by default, counted; --include-unmodified
    (the paper's code) keeps it, as analysis only: the same folder, nothing generated again."""
    rows = [
        {"q": "Sales were 5 in 2018 and 8 in 2019. Change?", "a": "3", "s": "train"},
        {"q": "Sales were 5 and then 8. Change?", "a": "3", "s": "train"},
        {"q": "Costs were 2 in 2017 and 6 in 2019. Change?", "a": "4", "s": "test"},
        {"q": "Costs were 2 and then 6. Change?", "a": "4", "s": "test"},
        {"q": "Debt was 9 in 2015 and 7 in 2016. Change?", "a": "-2", "s": "test"},
    ]
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    data = load_cap(
        str(path), ["train", "test"], fields=CapFields.parse("input=q,output=a,split=s")
    )
    sel = {s: data.splits[s].items for s in ("train", "test")}
    scorer = _scorer(tiny_backend, tmp_path)
    cfg = CapConfig(task="qa", year_shift=30, max_new_tokens=4, n_boot=200)
    out = run_cap(data, sel, scorer, RunDir(tmp_path / "q"), cfg)
    reason = "modified input equals the original (tests no consistency)"
    c = out.summary["counts"]
    assert c["train"]["excluded"] == {reason: 1} and c["train"]["analysed"] == 1
    assert c["test"]["excluded"] == {reason: 1} and c["test"]["analysed"] == 2
    kept = run_cap(data, sel, scorer, RunDir(tmp_path / "q"), replace(cfg, include_unmodified=True))
    assert kept.resumed == 5 and kept.scored_now == 0
    k = kept.summary["counts"]
    assert k["train"]["excluded"] == {} and (k["train"]["analysed"], k["test"]["analysed"]) == (
        2,
        3,
    )
    unchanged = [r for r in kept.records() if r["input"] == r["modified_input"]]
    from contamscope.detectors.cap import tokens

    # consistent by design: the same answer twice (1), unless it is no answer (0)
    assert len(unchanged) == 2 and all(
        r["prediction"] == r["modified_prediction"]
        and r["c"] == (1.0 if tokens(r["prediction"]) else 0.0)
        for r in unchanged
    )
    assert kept.summary["analysis"]["include_unmodified"] is True


def test_a_template_is_for_multiple_choice_only() -> None:
    from contamscope.perturb import get_template

    assert CapConfig(task="mcq", template=get_template("mmlu")).settings()["template"] == {
        "name": "mmlu",
        "question": "{question}\n",
        "option": "{label}. {text}\n",
        "answer": "Answer:",
    }
    assert "template" not in CapConfig(task="mcq").settings()  # older run folders still match
    with pytest.raises(ConfigError, match="--template lays out multiple-choice prompts; --task"):
        CapConfig(task="qa", template=get_template("mmlu"))


def test_reanalysing_a_finished_run_without_the_model_equals_a_re_run(
    fineval_dir: Path, tmp_path: Path
) -> None:
    """reanalyse_cap (no model, no data) gives what a re-run of the folder with the same
    analysis options gives, and keeps the run's provenance."""
    data = load_cap(str(fineval_dir), ["dev", "val"])
    sel = {s: data.splits[s].items for s in ("dev", "val")}
    scorer = _scorer(TextOnlyBackend(), tmp_path)
    first = run_cap(data, sel, scorer, RunDir(tmp_path / "run"), CapConfig(n_boot=200))
    other = {"alpha": 0.1, "scale": "linear", "n_boot": 300, "min_diff": 0.05}
    rerun = run_cap(data, sel, scorer, RunDir(tmp_path / "rerun"), CapConfig(**other))
    assert rerun.scored_now == 6  # (another folder: its records are its own)
    out = reanalyse_cap(tmp_path / "run", **other, mcq_metric=None)
    computed = ("analysis", "splits", "counts", "statistics", "verdict")
    assert {k: out.summary[k] for k in computed} == {k: rerun.summary[k] for k in computed}
    assert out.summary["statistics"] != first.summary["statistics"]
    assert out.summary["model"] == first.summary["model"]
    assert out.summary["timings"] == first.summary["timings"]
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["analysis"]["scale"] == "linear" and saved["analysis"]["n_boot"] == 300
    # options not given keep the run's (now the re-analysed ones)
    again = reanalyse_cap(tmp_path / "run", min_diff=0.0)
    assert (
        again.summary["analysis"]["scale"] == "linear" and again.summary["analysis"]["alpha"] == 0.1
    )
    with pytest.raises(ConfigError, match="CAP's analysis has no setting 'ties'"):
        reanalyse_cap(tmp_path / "run", ties="leaked")
    # records lost from items.jsonl: refused, the finished summary kept (it was rebuilt on
    # what was left, down to 0 items, exit 0; cross-reader QA)
    items = tmp_path / "run" / "items.jsonl"
    lines = items.read_text(encoding="utf-8").splitlines(keepends=True)
    before = (tmp_path / "run" / "summary.json").read_text(encoding="utf-8")
    for kept in (lines[:-1], []):
        items.write_text("".join(kept), encoding="utf-8")
        with pytest.raises(StoreError, match=f"holds {len(kept)} of its 6 items; re-run its cap"):
            reanalyse_cap(tmp_path / "run", min_diff=0.1)
        assert (tmp_path / "run" / "summary.json").read_text(encoding="utf-8") == before
    items.unlink()
    with pytest.raises(StoreError, match="holds 0 of its 6 items"):
        reanalyse_cap(tmp_path / "run")


class StatedAnswerBackend(TextOnlyBackend):
    """A black-box model that states its answer in a sentence, as chat models do."""

    def generate(
        self, requests: Sequence[GenerateRequest], progress: Any = None
    ) -> list[Generation]:
        return [Generation("根据题意计算，正确答案是B。", 9, "stop") for _ in requests]


def test_answers_stated_in_a_sentence_are_mapped_and_older_records_are_mapped_again(
    fineval_dir: Path, tmp_path: Path
) -> None:
    """'正确答案是B' and '选择：D' were left unmapped (M = 0 for a right answer); records a run
    stored under the older rules are mapped again from their stored generations when the run
    is resumed or re-analysed, so one run never counts items by two rule sets."""
    data = load_cap(str(fineval_dir), ["dev", "val"])
    sel = {s: data.splits[s].items for s in ("dev", "val")}
    scorer = _scorer(StatedAnswerBackend(), tmp_path)
    first = run_cap(data, sel, scorer, RunDir(tmp_path / "run"), CapConfig(n_boot=200))
    items = tmp_path / "run" / "items.jsonl"
    recs = [json.loads(x) for x in items.read_text().splitlines()]
    judged = [r for r in recs if not r["excluded"]]
    assert judged and all(r["choice"] == 1 for r in judged)
    assert first.summary["counts"]["dev"]["unmapped"]["original"] == 0
    # the records as the older rules stored them: nothing mapped
    for r in judged:
        r.update(choice=None, modified_choice=None, m=0.0, m_modified=0.0, c=0.0)
    items.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs))
    again = reanalyse_cap(tmp_path / "run")
    assert again.summary["statistics"] == first.summary["statistics"]
    assert again.summary["counts"] == first.summary["counts"]


class CountingBackend(StatedAnswerBackend):
    """Says each generation as it finishes, as a served model's requests do."""

    def generate(
        self, requests: Sequence[GenerateRequest], progress: Any = None
    ) -> list[Generation]:
        out = []
        for r in requests:
            out += super().generate([r])
            if progress is not None:
                progress(1)
        return out


def test_the_bar_moves_while_a_batch_generates(fineval_dir: Path, tmp_path: Path) -> None:
    """A served model's batch of 10 items showed 0 on the bar for half an hour, until the whole
    batch was written (QA): generations move it as they finish, and the batch ends on its
    item count."""
    data = load_cap(str(fineval_dir), ["dev", "val"])
    sel = {s: data.splits[s].items for s in ("dev", "val")}
    calls: list[float] = []
    run_cap(data, sel, CachedScorer(CountingBackend(), None), RunDir(tmp_path / "run"),
            CapConfig(n_boot=200), on_items=calls.append)  # fmt: skip
    n = sum(len(v) for v in sel.values())
    assert len(calls) > 2 and 0 < calls[0] < n  # one batch, seen moving
    assert sum(calls) == pytest.approx(n)


class FlakyScoringBackend(CountingBackend):
    """Generates, and scores letters until ``fail_after`` scoring calls, then refuses them,
    as a server that cannot serve the longer scoring requests does."""

    capabilities = Capabilities(prompt_logprobs=True, generate=True)

    def __init__(self, fail_after: int | None) -> None:
        self.fail_after = fail_after
        self.score_calls = 0
        self.generated: list[str] = []

    def fingerprint(self) -> str:
        return "fake-flaky-1"

    def score(self, requests: Sequence[ScoreRequest], progress: Any = None) -> list[ScoreResult]:
        self.score_calls += 1
        if self.fail_after is not None and self.score_calls > self.fail_after:
            raise ModelError("http://server/v1/completions: HTTP 400: prompt too long")
        return [ScoreResult(-float(len(r.prefix) % 7 + 1), 1) for r in requests]

    def generate(
        self, requests: Sequence[GenerateRequest], progress: Any = None
    ) -> list[Generation]:
        self.generated += [r.prompt for r in requests]
        return super().generate(requests, progress)


def test_a_failing_log_likelihood_reader_stops_the_run_after_every_answer_is_generated(
    fineval_dir: Path, tmp_path: Path
) -> None:
    """The optional reader's scoring requests failing (a server refusing them) stopped the run
    at that batch; now the generations go on into the cache, no record is written without its
    reader, and the error comes at the end: a re-run finishes without generating again and
    equals a run that never failed."""
    data = load_cap(str(fineval_dir), ["dev", "val"])
    sel = {s: data.splits[s].items for s in ("dev", "val")}
    cfg = CapConfig(n_boot=200, batch_items=2)
    flaky = FlakyScoringBackend(fail_after=1)
    cache = ScoreCache(tmp_path / "cache.sqlite")
    run = tmp_path / "run"
    with pytest.raises(ModelError, match="log-likelihood reader failed: .*HTTP 400.*4 item"):
        run_cap(data, sel, CachedScorer(flaky, cache), RunDir(run), cfg)
    assert len(set(flaky.generated)) == 12  # all 6 items, original and modified
    written = [json.loads(x) for x in (run / "items.jsonl").read_text().splitlines()]
    assert len(written) == 2 and all("loglik" in r for r in written)
    fixed = FlakyScoringBackend(fail_after=None)
    out = run_cap(data, sel, CachedScorer(fixed, cache), RunDir(run), cfg)
    assert fixed.generated == [] and out.resumed == 2 and out.scored_now == 4
    clean = run_cap(
        data, sel, CachedScorer(FlakyScoringBackend(None), None), RunDir(tmp_path / "c"), cfg
    )
    assert out.summary["statistics"] == clean.summary["statistics"]
    records = (run / "items.jsonl").read_text().splitlines()
    assert sorted(records) == sorted((tmp_path / "c" / "items.jsonl").read_text().splitlines())


def test_an_original_without_its_answer_is_no_reference_not_answer_changing(
    tiny_backend: Any, tmp_path: Path
) -> None:
    """An ori record without its output, beside a mod record with one, was counted as an
    item whose modification changes the answer (left out as such, answer_changing 1,
    no_reference 0): an answer it does not have cannot change (CAP QA)."""
    texts = [f"Sales were {k} in 2019 and {k + 2} in 2020. What was the change?" for k in (3, 5, 7)]
    folder = tmp_path / "pairs"
    folder.mkdir()
    for split in ("train", "test"):
        ori = [{"input": t, "output": "2"} for t in texts]
        mod = [{"input": t.replace("20", "21"), "output": "2"} for t in texts]
        if split == "train":
            del ori[1]["output"]
        (folder / f"ori_{split}.json").write_text(json.dumps(ori), encoding="utf-8")
        (folder / f"mod_{split}.json").write_text(json.dumps(mod), encoding="utf-8")
    data = load_cap(str(folder), ["train", "test"])
    assert data.task == "qa" and data.splits["train"].items[1].answer is None
    sel = {s: data.splits[s].items for s in ("train", "test")}
    cfg = CapConfig(task="qa", max_new_tokens=4, n_boot=200)
    out = run_cap(data, sel, _scorer(tiny_backend, tmp_path), RunDir(tmp_path / "r"), cfg)
    c = out.summary["counts"]["train"]
    assert (c["no_reference"], c["answer_changing"], c["excluded"]) == (1, 0, {})
    assert c["analysed"] == 2
    recs = [json.loads(x) for x in (tmp_path / "r" / "items.jsonl").read_text().splitlines()]
    assert recs[1]["modification"]["changes_answer"] is False and recs[1]["m"] is None
