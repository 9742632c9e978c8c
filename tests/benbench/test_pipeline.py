"""BenBench pipeline and CLI on the tiny random model (fast)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run_cli
from toy_rows import QA_ROWS as ROWS
from toy_rows import write_jsonl

from contamscope.backends.base import ScoreRequest
from contamscope.data.qa import load_qa
from contamscope.detectors.benbench import first_mismatch, starting_points
from contamscope.pipeline.benbench import BenBenchConfig, SplitInput, run_benbench
from contamscope.pipeline.benbench_refs import inline_reference
from contamscope.store import CachedScorer, RunDir, ScoreCache
from contamscope.wording import number


def _greedy_ids(backend, ids: list[int], n: int) -> list[int]:  # type: ignore[no-untyped-def]
    import torch

    with torch.inference_mode():
        out = backend.model.generate(
            input_ids=torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=n,
            do_sample=False,
            pad_token_id=0,
        )
    return out[0, len(ids) :].tolist()


def test_teacher_forced_exact_match_equals_generation(tiny_backend) -> None:  # type: ignore[no-untyped-def]
    """The whole point: exact-match decisions from one pass equal greedy generation's."""
    bos = [tiny_backend.bos_id]
    prompt = tiny_backend.tokenizer("Natalia sold clips to", add_special_tokens=False)["input_ids"]
    own = prompt + _greedy_ids(tiny_backend, bos + prompt, 12)  # the model's own continuation
    text = tiny_backend.decode(own)
    st = tiny_backend.token_stats([ScoreRequest("", text)])[0]
    if list(st.tokens) != own:
        pytest.skip("the greedy continuation does not re-tokenise to itself")
    other = "Natalia sold clips to 48 of her friends in April, and then half as many in May."
    st2 = tiny_backend.token_stats([ScoreRequest("", other)])[0]
    n = 3
    decisions = []
    for stats in (st, st2):
        toks = list(stats.tokens)
        for s in range(1, len(toks) - n + 1):
            gen = _greedy_ids(tiny_backend, bos + toks[:s], n)
            assert gen[0] == stats.greedy[s]
            fast = first_mismatch(toks, stats.greedy, s, n) is None
            assert fast == (gen == toks[s : s + n]), s
            decisions.append(fast)
    assert any(decisions) and not all(decisions)  # both outcomes exercised


def _run(tmp_path: Path, scorer: CachedScorer, cfg: BenBenchConfig, **kw: Any):  # type: ignore[no-untyped-def]
    bench = load_qa(str(write_jsonl(tmp_path / "toy-test.jsonl", ROWS)))
    ref = inline_reference(bench)
    assert ref is not None
    split = SplitInput("test", bench, bench.items, [ref])
    train = load_qa(str(write_jsonl(tmp_path / "toy-train.jsonl", ROWS[:2])))
    tsplit = SplitInput("train", train, train.items, [inline_reference(train)])  # type: ignore[list-item]
    return run_benbench([split, tsplit], scorer, RunDir(tmp_path / "run"), cfg, **kw)


def test_pipeline_records_summary_and_resume(tmp_path: Path, tiny_backend) -> None:  # type: ignore[no-untyped-def]
    cache = ScoreCache(tmp_path / "c.sqlite")
    scorer = CachedScorer(tiny_backend, cache)
    out = _run(tmp_path, scorer, BenBenchConfig(n_boot=200))
    s = out.summary
    assert s["schema"] == "contamscope.benbench.summary/1" and s["method"] == "benbench"
    assert s["model"]["fingerprint"] == scorer.fingerprint
    assert s["benchmark"]["test"]["content_hash"]
    recs = [json.loads(x) for x in (tmp_path / "run" / "items.jsonl").read_text().splitlines()]
    assert [r["id"] for r in recs] == [
        "test/toy-test-0",
        "test/toy-test-1",
        "test/toy-test-2",
        "train/toy-train-0",
        "train/toy-train-1",
    ]
    r0 = recs[0]
    orig, para = r0["versions"]
    assert orig["ppl"]["prefix"] == ROWS[0]["question"] + " Answer:"
    assert orig["ppl"]["continuation"] == " " + ROWS[0]["answer"]
    assert orig["ngram"]["text"] == ROWS[0]["question"] + " " + ROWS[0]["answer"]
    n_tok = orig["ngram"]["n_tokens"]
    assert orig["ngram"]["starts"] == starting_points(n_tok, n=5, k=5)
    assert len(orig["ngram"]["results"]) == 5
    for res in orig["ngram"]["results"]:
        assert res["predicted"] is not None  # lenient: every prediction is known
        assert res["exact"] == (res["predicted"] == res["original"]) or res["generated"]
    assert para["name"] == "inline" and para["question"] == ROWS[0]["rewritten_question"]
    assert r0["metrics"]["delta"]["ppl"] == pytest.approx(orig["ppl"]["ppl"] - para["ppl"]["ppl"])
    # the paraphrase that changes the final answer is reported, not scored
    assert len(recs[1]["versions"]) == 1
    assert recs[1]["reference_failures"][0]["reason"] == "final answer changed: '7' -> '8'"
    assert s["counts"]["test"]["paraphrase_failures"] == {"final answer changed": 1}
    assert s["counts"]["test"]["items_without_reference"] >= 1
    st = s["statistics"]["splits"]["test"]
    assert st["n_paired"] == 1 and st["delta"]["ppl"]["n"] == 1
    # one item, one paraphrase: the original is the more familiar of two versions or not
    assert st["delta"]["ppl"]["p_value"] == (0.5 if st["delta"]["ppl"]["delta"] < 0 else 1.0)
    assert st["delta"]["ppl"]["test"] == "randomization (exact)"
    dtt = s["statistics"]["delta_train_test"]["ppl"]
    assert dtt["value"] is not None and 0 < dtt["p_value"] <= 1
    # second run: everything resumed from the run folder
    again = _run(tmp_path, CachedScorer(tiny_backend, cache), BenBenchConfig(n_boot=200))
    assert again.scored_now == 0 and again.summary["statistics"] == s["statistics"]
    first = {k: v for k, v in s["timings"].items() if k != "earlier"}
    assert again.summary["timings"]["earlier"] == [first]  # the scoring run's timings kept
    assert first["device"] == "cpu" and first["executor"] == "local"  # with where it ran
    # a fresh folder reuses the cache: nothing computed
    scorer3 = CachedScorer(tiny_backend, cache)
    (tmp_path / "run").rename(tmp_path / "run-old")
    _run(tmp_path, scorer3, BenBenchConfig(n_boot=200))
    assert scorer3.computed == 0 and scorer3.reused > 0


def test_short_answer_and_too_short_text(tmp_path: Path, tiny_backend) -> None:  # type: ignore[no-untyped-def]
    rows = [
        {"question": "Q", "answer": "7"},
        {"question": "What is three plus four, in words?", "answer": "7"},
    ]
    bench = load_qa(str(write_jsonl(tmp_path / "s.jsonl", rows)))
    out = run_benbench(
        [SplitInput("test", bench, bench.items)],
        CachedScorer(tiny_backend, None),
        RunDir(tmp_path / "r"),
        BenBenchConfig(lenient=False, n_boot=200),
    )
    c = out.summary["counts"]["test"]
    assert c["excluded"] == {"text shorter than n + 2 = 7 tokens": 1}
    assert c["answer_shorter_than_n"] == 1
    assert out.summary["statistics"]["splits"]["test"]["reference"] is None
    assert out.summary["selection"]["n_items"] == {"test": 2}  # per split, as the command's


def test_cli_benbench_and_card(tmp_path: Path, tiny_model_path: Path) -> None:
    bench = write_jsonl(tmp_path / "toy-test.jsonl", [*ROWS[:2], {"question": "no answer"}])
    model = ["--model", f"hf:{tiny_model_path}", "-M", "bos=<|endoftext|>", "--device", "cpu"]
    r = run_cli(
        "benbench", *model, "--benchmark", str(bench), "--out", "run", "--no-lenient", cwd=tmp_path
    )
    assert r.returncode == 3, r.stderr  # finished, one row skipped
    assert "toy-test.jsonl:3: missing answer" in r.stderr
    assert "answer perplexity" in r.stdout and "Traceback" not in r.stderr
    said = " ".join(r.stdout.split())  # the report's verdict line (the terminal had none)
    # reason (count): the count once read as a noun's ("2 reply not in the ... form"; QA)
    assert "paraphrase not used: final answer changed (1); listed in summary.json" in said
    assert re.search(r"(no evidence|LEAK SIGNAL|inconclusive) on test", said), said
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["counts"]["test"]["rows_skipped"] == 1
    assert summary["skipped_rows"]["test"] == [f"{bench}:3: missing answer"]
    # a random model's perplexity (10^28 here) reads in 4 significant digits, not 29
    ppl = summary["statistics"]["splits"]["test"]["original"]["ppl"]
    assert re.search(rf"answer perplexity\s*│\s*{re.escape(number(ppl))}\s*│", r.stdout), r.stdout
    assert not re.search(r"\d{9}", r.stdout), r.stdout
    r = run_cli("card", "--run", "run", "--out", "card.md", "--model-name", "Tiny", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    card = (tmp_path / "card.md").read_text()
    assert card.startswith("# Benchmark Transparency Card: Tiny")
    assert "To be filled in by the model developer" in card
    data = json.loads((tmp_path / "card.json").read_text())
    assert data["checks"][0]["items"] == 2 and data["developer_fields"]["augmentation"] is None
    # a card named like the run's summary would overwrite it (--out run/summary.md wrote
    # run/summary.json over the run's summary)
    r = run_cli("card", "--run", "run", "--out", "run/summary.md", cwd=tmp_path)
    assert r.returncode == 2 and "run/summary.json: is a file of the run in run" in r.stderr
    assert json.loads((tmp_path / "run" / "summary.json").read_text()) == summary
    # user errors: one line, exit 2
    r = run_cli("benbench", *model, "--benchmark", "missing.jsonl", cwd=tmp_path)
    assert r.returncode == 2 and "missing.jsonl: no such file" in r.stderr
    assert "Traceback" not in r.stderr
    r = run_cli("benbench", *model, "--benchmark", str(bench), "--n", "0", cwd=tmp_path)
    assert r.returncode == 2 and "--n must be between" in r.stderr
    r = run_cli("card", "--run", "nowhere", cwd=tmp_path)
    assert r.returncode == 2 and "nowhere: no such run folder or summary.json" in r.stderr


def test_cli_reference_rows_skipped_partly_paired_and_unpaired(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    plain = [{"question": r["question"], "answer": r["answer"]} for r in ROWS[:2]]
    bench = write_jsonl(tmp_path / "toy-test.jsonl", plain)
    ref = tmp_path / "para.jsonl"  # a BenBench rewritten file: row 1 pairs, row 2 is broken
    ref.write_text(json.dumps(ROWS[0]) + "\n{oops\n", encoding="utf-8")
    model = ["--model", f"hf:{tiny_model_path}", "-M", "bos=<|endoftext|>", "--device", "cpu"]
    args = ["benbench", *model, "--benchmark", str(bench), "--no-lenient", "--reference"]
    r = run_cli(*args, str(ref), "--out", "run", cwd=tmp_path)
    assert r.returncode == 3, r.stderr  # finished; the reference's broken row was skipped
    assert f"skipped (reference para) {ref}:2: invalid JSON" in r.stderr
    assert "paraphrases 1 of the 2 selected items; 1 of its rows was skipped" in r.stderr
    out = " ".join(r.stdout.split())
    assert "para (1 paired: 1 ok, 0 failed; 1 row skipped)" in out
    # the table's columns cover different items: the original over both, said under it (the
    # row read as original - paraphrase != Delta, and the verdict spoke of all items; QA)
    assert re.search(r"original \(all 2\) \W* original \(1\) \W* paraphrase", out), out
    assert "original (all 2): mean over every analysed item; original (1), paraphrase, Delta" in out
    # the terminal gives the report's verdict line and what to do next (it gave neither)
    verdict = r"(no evidence|LEAK SIGNAL|inconclusive) on test \(the 1 of its 2 items with a para"
    assert re.search(verdict, out), out
    assert "report: contamscope report run" in out and "card: contamscope card --run run" in out
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["counts"]["test"]["reference_rows_skipped"] == 1
    assert summary["skipped_rows"]["test"][0].startswith(f"{ref}:2: invalid JSON")
    # a reference of other questions pairs with nothing: a user error before the model loads
    other = write_jsonl(tmp_path / "other.jsonl", [dict(ROWS[0], question="Unrelated?")])
    r = run_cli(*args, str(other), "--out", "run2", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "paraphrases none of the 2 selected items" in r.stderr
    assert f"first {other}:1" in r.stderr and not (tmp_path / "run2").exists()
    r = run_cli("benbench", *model, "--benchmark", str(bench), "--pairing", "row", cwd=tmp_path)
    assert r.returncode == 2 and "--pairing 'row': expected one of" in r.stderr


def test_cli_train_split_overlap_named_and_dropped(tmp_path: Path, tiny_model_path: Path) -> None:
    plain = [{"question": r["question"], "answer": r["answer"]} for r in ROWS[:2]]
    test = write_jsonl(tmp_path / "toy-test.jsonl", plain)
    shared = dict(plain[1], question="a box holds 12 pens  and 5 are taken out of it.")
    other = {"question": "Sue reads 20 pages a day for 3 days.", "answer": "60 pages.\n#### 60"}
    train = write_jsonl(tmp_path / "toy-train.jsonl", [other, shared])
    model = ["--model", f"hf:{tiny_model_path}", "-M", "bos=<|endoftext|>", "--device", "cpu"]
    args = ["benbench", *model, "--benchmark", str(test), "--train", str(train), "--no-lenient"]
    r = run_cli(*args, "--out", "kept", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    # no paraphrase: one line saying so, not the H0 paragraph that does not apply
    said = " ".join(r.stdout.split())
    assert "no verdict: no item of the test split has a usable paraphrase" in said
    assert "Leak direction" not in said and "over the 0 with a usable paraphrase" not in said
    assert (
        "overlap: 1 item of split test also in split train (same text; first: test/toy-test-1): "
        "kept; --drop-shared leaves them out"
    ) in r.stderr
    sel = json.loads((tmp_path / "kept" / "summary.json").read_text())["selection"]
    assert sel["overlap"]["train"] == {"shared": 1, "shared_with": {"test": 1}, "duplicates": 0}
    assert sel["n_items"] == {"test": 2, "train": 2} and sel["drop_shared"] is False
    r = run_cli(*args, "--drop-shared", "--out", "dropped", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "left out of both" in r.stderr
    # paraphrases for the test split only: Delta_train - Delta_test was null, unsaid (QA)
    rewritten = write_jsonl(tmp_path / "rw.jsonl", ROWS[:2])
    r = run_cli(*args, "-r", str(rewritten), "--out", "one-ref", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (
        "no reference versions for the train split (--train-reference, or a BenBench rewritten "
        "file as --train): it has no Delta, so Delta_train - Delta_test is not computed"
    ) in " ".join(r.stderr.split())
    # the card names the train split's own option (it said -r, the test split's; journey)
    r = run_cli("card", "--run", "one-ref", "--out", "card.md", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (
        f"{train} (train, one-ref): no item has a usable paraphrase, so no "
        "signal (give the paraphrases with --train-reference, or --paraphraser)"
    ) in " ".join(r.stderr.split())
    summary = json.loads((tmp_path / "dropped" / "summary.json").read_text())
    assert summary["selection"]["n_items"] == {"test": 1, "train": 1}
    ids = [json.loads(x)["id"] for x in (tmp_path / "dropped" / "items.jsonl").open()]
    assert sorted(ids) == ["test/toy-test-0", "train/toy-train-0"]
    # without a second split there is nothing to drop
    r = run_cli("benbench", *model, "--benchmark", str(test), "--drop-shared", cwd=tmp_path)
    assert r.returncode == 2 and "--drop-shared needs --train" in r.stderr


def test_cli_repeats_named_and_drop_repeats_leaves_them_out(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    """A repeated question counted twice in a split's Delta; only the permutation command
    could leave repeats out."""
    plain = [{"question": r["question"], "answer": r["answer"]} for r in ROWS[:2]]
    again = dict(plain[0], question=plain[0]["question"].upper())  # case and spacing aside
    test = write_jsonl(tmp_path / "toy-test.jsonl", [*plain, again])
    model = ["--model", f"hf:{tiny_model_path}", "-M", "bos=<|endoftext|>", "--device", "cpu"]
    args = ["benbench", *model, "--benchmark", str(test), "--no-lenient"]
    r = run_cli(*args, "--out", "kept", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (
        "repeats: split test holds 1 item repeating the text of an earlier one (first: "
        "toy-test-2 repeats toy-test-0): kept; --drop-repeats leaves them out"
    ) in " ".join(r.stderr.split())
    assert json.loads((tmp_path / "kept" / "summary.json").read_text())["selection"]["n_items"] == {
        "test": 3
    }
    r = run_cli(*args, "--drop-repeats", "--out", "dropped", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "): left out" in " ".join(r.stderr.split())
    summary = json.loads((tmp_path / "dropped" / "summary.json").read_text())
    assert summary["selection"]["n_items"] == {"test": 2}
    assert summary["selection"]["drop_repeats"] is True
    ids = [json.loads(x)["id"] for x in (tmp_path / "dropped" / "items.jsonl").open()]
    assert sorted(ids) == ["test/toy-test-0", "test/toy-test-1"]


def test_cli_reference_keeps_its_own_format_and_is_not_the_original(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    """--format names the benchmark's format: a BenBench rewritten reference is still read as
    one (as plain GSM8K its rows are the originals, Delta 0), its answers are stripped of the
    published leading space, and a reference that is the benchmark itself is refused."""
    plain = [{"question": r["question"], "answer": r["answer"]} for r in ROWS[:1]]
    bench = write_jsonl(tmp_path / "toy-test.jsonl", plain)
    ref = write_jsonl(
        tmp_path / "rewritten.jsonl",
        [dict(ROWS[0], rewritten_answer=" " + ROWS[0]["rewritten_answer"])],
    )
    model = ["--model", f"hf:{tiny_model_path}", "-M", "bos=<|endoftext|>", "--device", "cpu"]
    args = ["benbench", *model, "--benchmark", str(bench), "--format", "gsm8k-jsonl"]
    r = run_cli(*args, "--no-lenient", "--reference", str(ref), "--out", "run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rec = json.loads((tmp_path / "run" / "items.jsonl").read_text().splitlines()[0])
    (para,) = [v for v in rec["versions"] if v["name"] != "original"]
    assert para["question"] == ROWS[0]["rewritten_question"]
    assert para["answer"] == ROWS[0]["rewritten_answer"]  # no leading space
    # so with the generic --format qa-jsonl, when no --fields maps the reference's columns (it
    # read the rewritten file's originals: "every paired row is the original's own text"; QA)
    qa = [a if a != "gsm8k-jsonl" else "qa-jsonl" for a in args]
    r = run_cli(*qa, "--no-lenient", "--rouge-threshold", "0.5", "--inclusive", "--reference",
                str(ref), "--out", "qa", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    # a lenient criterion's threshold with --no-lenient was recorded as used, unsaid (QA)
    said = " ".join(r.stderr.split())
    assert "ignored --rouge-threshold: it applies to --lenient runs; this is --no-lenient" in said
    assert "ignored --inclusive: it applies to --lenient runs; this is --no-lenient" in said
    config = json.loads((tmp_path / "qa" / "summary.json").read_text())["config"]
    assert config["rouge_threshold"] == 0.75 and config["inclusive"] is False
    rec = json.loads((tmp_path / "qa" / "items.jsonl").read_text().splitlines()[0])
    (para,) = [v for v in rec["versions"] if v["name"] != "original"]
    assert para["question"] == ROWS[0]["rewritten_question"]
    r = run_cli(*args, "--reference", str(bench), "--out", "run2", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"--reference {bench}: every paired row is the original's own text" in r.stderr
    # two references of one file name keep apart (their folders name them); one file given
    # twice would count its paraphrases twice, and so would a copy of it (QA)
    twin = tmp_path / "b" / "rewritten.jsonl"
    twin.parent.mkdir()
    twin.write_text(ref.read_text(encoding="utf-8"), encoding="utf-8")
    r = run_cli(*args, "--no-lenient", "-r", str(ref), "-r", str(twin), "--out", "r3", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert f"--reference {twin}: the same contents as {ref}; give each paraphrase set once" in (
        " ".join(r.stderr.split())
    )
    other = dict(ROWS[0], rewritten_question=ROWS[0]["rewritten_question"] + " Say it.")
    write_jsonl(twin, [other])
    r = run_cli(*args, "--no-lenient", "-r", str(ref), "-r", str(twin), "--out", "r3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rec = json.loads((tmp_path / "r3" / "items.jsonl").read_text().splitlines()[0])
    names = [v["name"] for v in rec["versions"]]
    assert names == ["original", f"{tmp_path.name}/rewritten", "b/rewritten"]
    r = run_cli(*args, "-r", str(ref), "-r", f"{tmp_path}/b/../rewritten.jsonl", cwd=tmp_path)
    assert r.returncode == 2 and "--reference" in r.stderr and "given twice" in r.stderr
    # a rewritten benchmark carries its paraphrases: the same file with -r counted them twice
    own = ["benbench", *model, "--benchmark", str(ref), "--no-lenient", "-r", str(ref)]
    r = run_cli(*own, "--out", "r4", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    said = " ".join(r.stderr.split())
    assert f"--reference {ref}: the benchmark file itself, whose paraphrases are read" in said


def test_paraphrases_that_all_fail_their_checks_are_refused_before_the_model_loads(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    """Rows paired with the wrong items change every final answer: the run loaded the model,
    scored, and ended "no verdict: ... give the paraphrases with --reference" to a user who
    had (QA). Refused in one line, before any work; one usable paraphrase is enough."""
    plain = [
        {"question": "Tom has 3 apples and buys 4 more apples at the shop.",
         "answer": "He has 3 + 4 = 7 apples in total now.\n#### 7"},
        {"question": "A box holds 12 pens and 5 are taken out of it, then 2 more.",
         "answer": "12 - 5 - 2 = 5 pens remain in the box.\n#### 5"},
    ]  # fmt: skip
    bench = write_jsonl(tmp_path / "toy-test.jsonl", plain)
    rotated = [dict(r, question=f"Here is a problem. {r['question']}") for r in plain[::-1]]
    ref = write_jsonl(tmp_path / "rotated.jsonl", rotated)
    model = ["--model", f"hf:{tiny_model_path}", "--device", "cpu", "--no-lenient"]
    args = ["benbench", *model, "--benchmark", str(bench), "--pairing", "order", "-r", str(ref)]
    r = run_cli(*args, "--out", "bad", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    said = " ".join(r.stderr.split())
    assert (
        "--reference: none of the 2 paraphrases paired with the selected items of split test "
        "is usable (final answer changed: 2): nothing to compare the originals with; are the "
        "rows paired with the right items (--pairing"
    ) in said
    assert not (tmp_path / "bad").exists()
    good = [dict(r, question=f"Here is a problem. {r['question']}") for r in plain]
    write_jsonl(ref, [good[0], rotated[1]])  # one of the two usable: the run goes on
    r = run_cli(*args, "--out", "ok", cwd=tmp_path)
    assert r.returncode == 0, r.stderr


def test_drop_shared_that_leaves_a_split_empty_is_refused(tmp_path: Path) -> None:
    """The run loaded the model, printed "0 analysed of 0" and exited 0."""
    rows = [{"question": f"Q{i}?", "answer": f"{i}\n#### {i}"} for i in range(3)]
    path = tmp_path / "same.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    res = run_cli(
        "benbench", "--model", "hf:nowhere-model", "--benchmark", str(path), "--train",
        str(path), "--drop-shared", "--no-lenient", "--out", str(tmp_path / "o"), cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1] == (
        "error: --drop-shared left no items in split test (each is in another split too)"
    )


def test_all_items_too_short_is_said_not_blamed_on_the_paraphrases(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    """Every item shorter than n + 2 tokens: the verdict said no item had a usable
    paraphrase, and asked for --reference, which was given."""
    bench = write_jsonl(tmp_path / "tiny.jsonl", [{"question": "Hi?", "answer": "#### 1"},
                                                   {"question": "Yo?", "answer": "#### 2"}])  # fmt: skip
    ref = write_jsonl(tmp_path / "tinyp.jsonl", [{"question": "Hello?", "answer": "#### 1"},
                                                  {"question": "Hey?", "answer": "#### 2"}])  # fmt: skip
    model = ["--model", f"hf:{tiny_model_path}", "-M", "bos=<|endoftext|>", "--device", "cpu"]
    r = run_cli("benbench", *model, "--benchmark", str(bench), "-r", str(ref), "--no-lenient",
                "--out", "short", cwd=tmp_path)  # fmt: skip
    said = " ".join(r.stdout.split())
    assert "no verdict: none of the 2 items of the test split could be analysed" in said, said
    assert "text shorter than n + 2 = 7 tokens: 2" in said
    assert "usable paraphrase" not in said


def test_ngram_texts_hold_whole_characters(tiny_backend: Any) -> None:
    """Chinese and emoji take several byte-level tokens: the n-gram texts decoded from their
    tokens alone held '\ufffd' (in the report and items.jsonl), and so did the generation
    prompt; ROUGE-L and edit similarity compared the damaged strings (HTML QA)."""
    from contamscope.backends.base import TokenStats
    from contamscope.pipeline.benbench import _ngram_plan

    text = "小明有12个苹果🍎，又买了5个。现在有几个？答案是17个苹果🍏，对吗？是的，没错。"
    toks = tuple(tiny_backend.tokenizer.encode(text, add_special_tokens=False))
    decode = tiny_backend.decode
    assert any("\ufffd" in decode(toks[i : i + 5]) for i in range(len(toks) - 5))  # the trap
    wrong = tuple(t + 1 for t in toks)  # every greedy guess wrong: generations are planned
    for greedy in (toks, wrong):
        stats = TokenStats(tokens=toks, logprobs=(0.0,) * len(toks), greedy=greedy)
        starts, partial, gens = _ngram_plan(stats, BenBenchConfig(n=5, k=5), decode)
        assert len(starts) == 5
        for p, g in zip(partial, gens, strict=True):
            assert "\ufffd" not in p["original"] and p["original"] in text, p
            if g is not None:  # the prompt ends where the original starts, on a character
                assert "\ufffd" not in g.prompt and text.startswith(g.prompt + p["original"])
        assert all(p["predicted"] == p["original"] for p in partial) == (greedy == toks)


def test_card_of_a_run_whose_train_split_has_no_usable_paraphrase(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    """The card wrote the train-vs-test heading over an empty table, and told a run whose
    paraphraser's replies all failed to give --paraphraser (QA)."""
    bench = write_jsonl(tmp_path / "toy-test.jsonl", ROWS[:2])
    plain = [{"question": r["question"], "answer": r["answer"]} for r in ROWS[:2]]
    train = write_jsonl(tmp_path / "toy-train.jsonl", plain)
    model = ["--model", f"hf:{tiny_model_path}", "-M", "bos=<|endoftext|>", "--device", "cpu"]
    r = run_cli(
        "benbench", *model, "--benchmark", str(bench), "--train", str(train), "--no-lenient",
        "--paraphraser", f"hf:{tiny_model_path}", "--out", "run", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["counts"]["train"]["paraphrase_failures"]  # a random model's replies
    # the train split's header line: not a bare "none" beside --paraphraser (QA)
    assert "references: none usable from --paraphraser" in " ".join(r.stdout.split())
    assert all(v["value"] is None for v in summary["statistics"]["delta_train_test"].values())
    r = run_cli("card", "--run", "run", "--out", "card.md", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    card = (tmp_path / "card.md").read_text()
    assert "Training split vs test split" not in card
    flat = " ".join(card.split())
    # every note names its run folder (from the card's folder), as the docs say (two did not)
    assert f"{train} / {bench} (run): train vs test not compared" in flat
    assert (
        f"{train} (train, run): no item has a usable paraphrase, so no signal (2 paraphrases"
    ) in flat
    assert "failed the checks (summary.json's paraphrase_failures); give the paraphrases with " \
        "--train-reference)" in flat  # fmt: skip


@pytest.mark.parametrize("bad", [-math.inf, math.nan])
def test_non_finite_answer_logprob_excludes_the_version_with_its_reason(
    tmp_path: Path, tiny_backend: Any, bad: float
) -> None:
    """A -inf answer log-prob (a token of probability 0) gave a perplexity of inf, so the
    dataset mean and every Delta read inf/NaN, and items.jsonl held 'Infinity'; a NaN read as
    'longer than the model's context window' (the wrong reason)."""
    from contamscope.backends.base import TokenStats

    rows = [
        {"question": "What is three plus four, in words, please?", "answer": "seven is it"},
        {"question": "What is two plus two, written in words?", "answer": "four is the answer"},
    ]
    bench = load_qa(str(write_jsonl(tmp_path / "s.jsonl", rows)))
    scorer = CachedScorer(tiny_backend, None)
    real = scorer.token_stats

    def faulty(reqs: list[ScoreRequest]) -> list[TokenStats]:
        out = real(reqs)
        st = out[0]  # the first item's answer (perplexity) request
        out[0] = TokenStats(st.tokens, (bad, *st.logprobs[1:]), st.greedy)
        return out

    scorer.token_stats = faulty  # type: ignore[method-assign]
    out = run_benbench(
        [SplitInput("test", bench, bench.items)],
        scorer,
        RunDir(tmp_path / "r"),
        BenBenchConfig(lenient=False, n_boot=200),
    )
    text = (tmp_path / "r" / "items.jsonl").read_text()
    assert "Infinity" not in text and "NaN" not in text
    recs = [json.loads(x) for x in text.splitlines()]
    assert recs[0]["excluded"].startswith("a non-finite token log-prob")
    assert recs[1]["excluded"] is None
    c = out.summary["counts"]["test"]
    assert sum(c["excluded"].values()) == 1
    assert math.isfinite(out.summary["statistics"]["splits"]["test"]["original"]["ppl"])
    # the terminal says why, as a permutation run's does (it said only "1 analysed of 2"; QA)
    from contamscope.cli.benbench import print_benbench_summary
    from contamscope.cli.common import console

    with console.capture() as shown:
        print_benbench_summary(out.summary)
    said = " ".join(shown.get().split())
    assert "1 analysed of 2; excluded: 1 a non-finite token log-prob" in said


def test_a_paraphraser_without_a_chat_template_is_said_and_its_replies_checked(
    tmp_path: Path, tiny_backend, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """The request to paraphrase went to a base model (the bundled Gemma 3) as plain text,
    silently; a random model's replies are no paraphrases: each is recorded as not ok."""
    from contamscope.errors import ContamscopeWarning

    monkeypatch.setattr(tiny_backend.tokenizer, "chat_template", None)
    scorer = CachedScorer(tiny_backend, None)
    cfg = BenBenchConfig(n_boot=100, paraphrase_max_tokens=8)
    with pytest.warns(ContamscopeWarning, match=r"--paraphraser hf:\S+ has no chat template"):
        _run(tmp_path, scorer, cfg, paraphraser=scorer)
    recs = [json.loads(x) for x in (tmp_path / "run" / "items.jsonl").read_text().splitlines()]
    made = [r["generated_paraphrase"] for r in recs]
    assert len(made) == len(recs) and not any(p["ok"] for p in made)


def test_a_record_the_summary_cannot_read_is_scored_again_not_a_traceback(
    tmp_path: Path, tiny_backend: Any
) -> None:
    """A finished record without ``versions`` (or with a broken perplexity) was kept as done,
    and the resume ended in ``KeyError: 'versions'``; re-analysis said one line with no
    count (cross-reader QA). Such a record is dropped with a note and scored again; reanalyse
    says how many items the folder holds."""
    from contamscope.errors import ContamscopeWarning, StoreError
    from contamscope.pipeline.benbench import reanalyse_benbench

    scorer = CachedScorer(tiny_backend, ScoreCache(tmp_path / "c.sqlite"))
    first = _run(tmp_path, scorer, BenBenchConfig(n_boot=200))
    items = tmp_path / "run" / "items.jsonl"
    good = items.read_text(encoding="utf-8")
    recs = [json.loads(x) for x in good.splitlines()]
    for damage in ("no versions", "nll text"):
        broken = [dict(r) for r in recs]
        if damage == "no versions":
            del broken[1]["versions"]
        else:
            ver = json.loads(json.dumps(broken[1]["versions"]))
            ver[0]["ppl"]["nll"] = "n/a"
            broken[1]["versions"] = ver
        text = "".join(json.dumps(r) + "\n" for r in broken)
        items.write_text(text, encoding="utf-8")
        with (
            pytest.warns(ContamscopeWarning, match="1 damaged or unreadable record"),
            pytest.raises(StoreError, match="holds 4 of its 5 items; re-run its benbench"),
        ):
            reanalyse_benbench(tmp_path / "run")
        assert items.read_text(encoding="utf-8") == text  # refused: nothing written
        with pytest.warns(ContamscopeWarning, match="1 damaged or unreadable record"):
            again = _run(tmp_path, scorer, BenBenchConfig(n_boot=200))
        assert again.scored_now == 1 and again.resumed == 4, damage
        assert again.summary["statistics"] == first.summary["statistics"]
        stored = sorted(json.loads(x)["id"] for x in items.read_text(encoding="utf-8").splitlines())
        assert stored == sorted(r["id"] for r in recs)
