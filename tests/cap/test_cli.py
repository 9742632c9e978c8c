"""`contamscope cap` as a subprocess: tiny model end to end, bad input, skipped rows."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_runner import run_cli as run_contamscope

from contamscope.report import build_report


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_contamscope("cap", *args, cwd=cwd)


def test_cap_cli_end_to_end(fineval_dir: Path, tiny_model_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = [
        "--model",
        f"hf:{tiny_model_path}",
        "--benchmark",
        str(fineval_dir),
        "--splits",
        "dev,val",
        "--out",
        str(out),
        "--device",
        "cpu",
        "--n-boot",
        "200",
        # 5 is out of range: ignored as said (it was said to be ignored, then refused)
        *("--year-shift", "30", "--similarity-threshold", "5", "--mcq-metric", "mapped"),
    ]
    res = run_cli(*args, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "task: mcq (detected" in res.stderr
    # options of other tasks are named as ignored; --mcq-metric (this task's, default) is not
    ignored = [ln for ln in res.stderr.splitlines() if ln.startswith("ignored")]
    assert ignored == [
        "ignored --similarity-threshold: it applies to summary tasks; this is mcq",
        "ignored --year-shift: it applies to qa tasks; this is mcq",
    ]
    assert "PCR_dev - PCR_val" in res.stdout and "verdict:" in res.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["schema"] == "contamscope.cap.summary/1"
    # the answers' source said (from the cache, none was sent: QA); the counts are summary's
    tm = summary["timings"]
    asked = tm["requests_computed"] + tm["requests_from_cache"]
    assert tm["requests_from_cache"] == 0 and asked > 0
    assert f"answered 6 items in {tm['seconds']:.1f} s; 0 of {asked} requests from the" in (
        " ".join(res.stdout.split())
    )
    elsewhere = [str(tmp_path / "copy") if a == str(out) else a for a in args]
    copy = run_cli(*elsewhere, cwd=tmp_path)  # another run folder: every answer from the cache
    assert f"{asked} of {asked} requests from the score cache (not sent to the model)" in (
        " ".join(copy.stdout.split())
    )
    assert len((out / "items.jsonl").read_text().splitlines()) == 6
    assert (out / "pcr_heatmap.png").stat().st_size > 1000
    assert not (out / "report.html").exists() and f"report: contamscope report {out}" in res.stdout
    again = run_cli(*args, "--report", cwd=tmp_path)
    assert again.returncode == 0 and "resuming: 6 of 6" in again.stderr
    assert f"report: {out / 'report.html'}" in again.stdout and (out / "report.html").exists()
    # other analysis settings without the model: the summary and the heatmap are redone
    summary = json.loads((out / "summary.json").read_text())
    before = (out / "pcr_heatmap.png").stat().st_mtime_ns
    re = run_contamscope(
        "reanalyse", str(out), "--pcr-alpha", "0.1", "--scale", "linear", "--min-diff", "0.3",
        cwd=tmp_path,
    )  # fmt: skip
    assert re.returncode == 0, re.stderr
    assert "re-analysed 6 stored items; nothing scored" in re.stderr
    assert "requests from the score cache" not in re.stdout  # (the timings are the run's)
    assert "PCR = linear((M+0.1)/(C+0.1))" in re.stdout and "PCR_dev - PCR_val" in re.stdout
    s2 = json.loads((out / "summary.json").read_text())
    assert (s2["analysis"]["alpha"], s2["analysis"]["scale"]) == (0.1, "linear")
    assert s2["analysis"]["min_diff"] == 0.3 and s2["analysis"]["n_boot"] == 200  # kept
    assert s2["timings"] == summary["timings"] and s2["model"] == summary["model"]
    assert (out / "pcr_heatmap.png").stat().st_mtime_ns > before
    wrong = run_contamscope("reanalyse", str(out), "--ties", "leaked", cwd=tmp_path)
    assert wrong.returncode == 2 and "--ties: not a setting of a cap run" in wrong.stderr
    # another task's option was re-analysed without a word (QA), as cap itself names it
    wrong = run_contamscope("reanalyse", str(out), "--similarity-threshold", "0.5", cwd=tmp_path)
    assert wrong.returncode == 2
    assert (
        "--similarity-threshold: a setting of summary-task CAP runs; this run's task is mcq"
        in wrong.stderr
    )


def test_cap_cli_user_errors(fineval_dir: Path, tmp_path: Path) -> None:
    res = run_cli("--benchmark", str(fineval_dir), "--splits", "train,test", cwd=tmp_path)
    assert res.returncode == 2 and "split 'train'" in res.stderr and "Traceback" not in res.stderr
    res = run_cli("--benchmark", str(tmp_path / "nope"), cwd=tmp_path)
    # the option is named: the journey audit's user did not know which argument was missing
    assert res.returncode == 2
    assert f"error: --benchmark {tmp_path / 'nope'}: no such file or folder" in res.stderr
    res = run_cli("--benchmark", str(fineval_dir), "--splits", "dev", cwd=tmp_path)
    assert res.returncode == 2 and "at least two splits" in res.stderr
    # one line: the detected task's line came first (QA)
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    res = run_cli("--benchmark", str(fineval_dir), "--splits", "dev,val", "--scale", "foo",
                  cwd=tmp_path)  # fmt: skip
    assert "--scale 'foo'" in res.stderr
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    # FinEval's test split has no answers: M is undefined there (was "no evidence", +nan)
    res = run_cli("--benchmark", str(fineval_dir), "--splits", "dev,test", cwd=tmp_path)
    assert res.returncode == 2 and "split 'test' has no reference answers" in res.stderr
    # --alpha is a significance level in every other command; here it silently changed the
    # PCR smoothing constant (journey audit): now --pcr-alpha, and --alpha is refused
    res = run_cli("--benchmark", str(fineval_dir), "--alpha", "0.05", cwd=tmp_path)
    assert res.returncode == 2 and "--alpha 0.05: cap's PCR smoothing constant is --pcr-alpha" in (
        " ".join(res.stderr.split())
    )


def test_cap_cli_skipped_rows_exit_3(
    fineval_dir: Path, tiny_model_path: Path, tmp_path: Path
) -> None:
    path = fineval_dir / "data" / "ori_val.json"
    rows = json.loads(path.read_text(encoding="utf-8"))
    rows[1]["input"] = "garbage"
    text = json.dumps(rows, ensure_ascii=False, indent=1)
    path.write_text(text, encoding="utf-8")
    # the record's own line, and its number in the list (its number was given as its line; QA)
    at = [i for i, ln in enumerate(text.splitlines(), 1) if ln == " {"][1]
    assert at > 2
    res = run_cli(
        "--model",
        f"hf:{tiny_model_path}",
        "--benchmark",
        str(fineval_dir),
        "--splits",
        "dev,val",
        "--out",
        str(tmp_path / "r"),
        "--device",
        "cpu",
        "--no-plot",
        "--no-loglik",
        "--n-boot",
        "200",
        cwd=tmp_path,
    )
    assert res.returncode == 3, res.stderr
    said = f"{path}:{at}: record 2 of the list: input is not a FinEval prompt (README format)"
    assert said in " ".join(res.stderr.split())
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["skipped_rows"] == [said]


@pytest.mark.real_model
def test_smollm2_on_fineval(benchdata: Path, smollm2_backend: object, tmp_path: Path) -> None:
    """The bundled model on 2 real FinEval items per split (dev vs val), supplied mod files."""
    from contamscope.data.cap import load_cap
    from contamscope.pipeline.cap import CapConfig, run_cap
    from contamscope.store import CachedScorer, RunDir, ScoreCache

    data = load_cap(str(benchdata / "cap" / "fineval"), ["dev", "val"])
    sel = {s: data.splits[s].items[:2] for s in ("dev", "val")}
    scorer = CachedScorer(smollm2_backend, ScoreCache(tmp_path / "c.sqlite"))  # type: ignore[arg-type]
    out = run_cap(
        data,
        sel,
        scorer,
        RunDir(tmp_path / "run"),
        CapConfig(task="mcq", max_new_tokens=4, n_boot=200),
    )
    s = out.summary
    recs = [json.loads(x) for x in (tmp_path / "run" / "items.jsonl").read_text().splitlines()]
    assert len(recs) == 4 and all("prediction" in r and "loglik" in r for r in recs)
    for split in ("dev", "val"):
        st = s["statistics"]["loglik"]["splits"][split]
        assert st["n"] == 2 and 0 <= st["m"] <= 1 and 0 <= st["c"] <= 1
    assert s["verdict"]["label"] in (
        "no evidence",
        "likely fine-tuned on dev",
        "likely contaminated by val",
        "inconclusive",
    )
    blank = [
        v["n"] and not (v["m"] or v["c"]) for v in s["statistics"]["generate"]["splits"].values()
    ]
    assert (s["verdict"]["label"] == "inconclusive") == any(blank)


def test_cap_cli_names_and_drops_items_shared_by_splits(
    fineval_dir: Path, tiny_model_path: Path, tmp_path: Path
) -> None:
    data = fineval_dir / "data"
    for kind in ("ori", "mod"):  # val's first item becomes dev's first (spacing aside)
        dev = json.loads((data / f"{kind}_dev.json").read_text(encoding="utf-8"))
        val = json.loads((data / f"{kind}_val.json").read_text(encoding="utf-8"))
        val[0] = dict(dev[0], input=dev[0]["input"].replace("dev ", "dev  "))
        (data / f"{kind}_val.json").write_text(json.dumps(val, ensure_ascii=False), "utf-8")
    common = ["--model", f"hf:{tiny_model_path}", "--benchmark", str(fineval_dir)]
    common += ["--splits", "dev,val", "--device", "cpu", "--no-plot", "--no-loglik"]
    common += ["--n-boot", "100"]
    kept = run_cli(*common, "--out", str(tmp_path / "kept"), cwd=tmp_path)
    assert kept.returncode == 0, kept.stderr
    assert (
        "overlap: 1 item of split dev also in split val (same text; first: dev/ori_dev-1): "
        "kept; --drop-shared leaves them out"
    ) in kept.stderr
    summary = json.loads((tmp_path / "kept" / "summary.json").read_text())
    sel = summary["benchmark"]["selection"]
    assert sel["overlap"] == {
        "dev": {"shared": 1, "shared_with": {"val": 1}, "duplicates": 0},
        "val": {"shared": 1, "shared_with": {"dev": 1}, "duplicates": 0},
    }
    assert sel["n_items"] == {"dev": 3, "val": 3} and sel["drop_shared"] is False
    assert summary["benchmark"]["overlap_selected"] == sel["overlap"]  # all items selected
    html = build_report(tmp_path / "kept").read_text(encoding="utf-8")
    assert "<b>Overlap between splits</b> among the items analysed" in html

    dropped = run_cli(*common, "--drop-shared", "--out", str(tmp_path / "dropped"), cwd=tmp_path)
    assert dropped.returncode == 0, dropped.stderr
    assert "left out of both" in dropped.stderr
    records = [
        json.loads(x) for x in (tmp_path / "dropped" / "items.jsonl").read_text().splitlines()
    ]
    assert sorted(r["id"] for r in records) == [
        "dev/ori_dev-2",
        "dev/ori_dev-3",
        "val/ori_val-2",
        "val/ori_val-3",
    ]
    summary = json.loads((tmp_path / "dropped" / "summary.json").read_text())
    assert summary["benchmark"]["selection"]["n_items"] == {"dev": 2, "val": 2}
    assert [summary["counts"][s]["items"] for s in ("dev", "val")] == [2, 2]
    # --limit 2 leaves val's shared item out of the selection: the report's counts are over
    # the items analysed (they were the files': "dev: 1 items also in another split")
    for kind in ("ori", "mod"):
        val = json.loads((data / f"{kind}_val.json").read_text(encoding="utf-8"))
        val = val[1:3] + val[:1] + val[3:]  # the shared item is now val's third
        (data / f"{kind}_val.json").write_text(json.dumps(val, ensure_ascii=False), "utf-8")
    two = run_cli(*common, "--limit", "2", "--out", str(tmp_path / "two"), cwd=tmp_path)
    assert two.returncode == 0, two.stderr
    # in the files, and said to be outside the 2 + 2 items the run analyses
    assert (
        "overlap: 1 item of split dev also in split val (same text; first: dev/ori_dev-1): "
        "kept, 0 of them among the selected items; --drop-shared leaves them out"
    ) in two.stderr
    three = run_cli(*common, "--limit", "3", "--out", str(tmp_path / "three"), cwd=tmp_path)
    assert three.returncode == 0, three.stderr
    assert "kept, 1 of them among the selected items; --drop-shared" in three.stderr
    s2 = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert s2["benchmark"]["selection"]["overlap"]["dev"]["shared"] == 1
    assert s2["benchmark"]["overlap_selected"]["dev"] == {
        "shared": 0,
        "shared_with": {},
        "duplicates": 0,
    }
    assert "Overlap between splits" not in build_report(tmp_path / "two").read_text("utf-8")


def test_cap_cli_drop_repeats_leaves_repeated_items_out(
    fineval_dir: Path, tiny_model_path: Path, tmp_path: Path
) -> None:
    data = fineval_dir / "data"
    for kind in ("ori", "mod"):  # dev's third item repeats its first
        dev = json.loads((data / f"{kind}_dev.json").read_text(encoding="utf-8"))
        dev[2] = dict(dev[0])
        (data / f"{kind}_dev.json").write_text(json.dumps(dev, ensure_ascii=False), "utf-8")
    common = ["--model", f"hf:{tiny_model_path}", "--benchmark", str(fineval_dir)]
    common += ["--splits", "dev,val", "--device", "cpu", "--no-plot", "--no-loglik"]
    common += ["--n-boot", "100"]
    kept = run_cli(*common, "--out", str(tmp_path / "kept"), cwd=tmp_path)
    assert kept.returncode == 0, kept.stderr
    said = " ".join(kept.stderr.split())
    assert "repeats: split dev holds 1 item repeating the text of an earlier one" in said
    assert "kept; --drop-repeats leaves them out" in said
    dropped = run_cli(*common, "--drop-repeats", "--out", str(tmp_path / "dropped"), cwd=tmp_path)
    assert dropped.returncode == 0, dropped.stderr
    summary = json.loads((tmp_path / "dropped" / "summary.json").read_text())
    assert summary["benchmark"]["selection"]["n_items"] == {"dev": 2, "val": 3}
    assert summary["benchmark"]["selection"]["drop_repeats"] is True
    ids = [json.loads(x)["id"] for x in (tmp_path / "dropped" / "items.jsonl").open()]
    assert "dev/ori_dev-3" not in ids and "dev/ori_dev-1" in ids


def test_year_shift_on_supplied_modified_inputs_is_said_to_be_ignored(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    """--year-shift was silently unused when the data supplies its modified inputs: the shift
    only makes the modified inputs of items without one."""
    rows = [
        {"q": f"Sales were {a} in 2018 and {a + 3} in 2019. Change?", "a": "3", "s": s,
         "m": f"Sales were {a} in 2048 and {a + 3} in 2049. Change?"}
        for s in ("train", "test") for a in (1, 2)
    ]  # fmt: skip
    data = tmp_path / "qa_mod.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    args = ["--model", f"hf:{tiny_model_path}", "--benchmark", str(data), "--task", "qa"]
    args += ["--fields", "input=q,output=a,split=s,modified=m", "--splits", "train,test"]
    args += ["--device", "cpu", "--no-plot", "--n-boot", "100", "--max-new-tokens", "4"]
    r = run_cli(*args, "--year-shift", "30", "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    said = " ".join(r.stderr.split())
    assert "ignored --year-shift on the items of train, test with a modified input" in said
    r = run_cli(*args, "--out", str(tmp_path / "plain"), cwd=tmp_path)
    assert r.returncode == 0 and "--year-shift" not in r.stderr


def test_cap_template_lays_out_the_mcq_prompts(
    fineval_dir: Path, qa_file: Path, tiny_model_path: Path, tmp_path: Path
) -> None:
    """--template replaces FinEval's layout (a Chinese benchmark asked in Chinese, say): the
    prompts sent are the layout's, original and modified alike; the run folder keeps it, so
    another layout is refused and the same one resumes. A qa task says it ignores it."""
    layout = json.dumps({"question": "问题：{question}\n", "option": "{label}. {text}\n",
                         "answer": "答案："}, ensure_ascii=False)  # fmt: skip
    out = tmp_path / "run"
    args = ["--model", f"hf:{tiny_model_path}", "--device", "cpu", "--n-boot", "200"]
    bench = ["--benchmark", str(fineval_dir), "--splits", "dev,val", "--out", str(out)]
    res = run_cli(*args, *bench, "--template", layout, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    records = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    assert len(records) == 6
    for r in records:
        for prompt in (r["input"], r["modified_input"]):
            assert prompt.startswith(f"问题：{r['split']} ") and prompt.endswith("\n答案：")
            assert "\nA. " in prompt and "\nD. " in prompt and "'A':" not in prompt
    settings = json.loads((out / "settings.json").read_text())
    assert settings["config"]["template"]["answer"] == "答案："

    again = run_cli(*args, *bench, "--template", layout, cwd=tmp_path)
    assert again.returncode == 0 and "resuming: 6 of 6" in again.stderr
    other = run_cli(*args, *bench, "--template", "mmlu", cwd=tmp_path)
    assert other.returncode == 2
    assert "template" in other.stderr.strip().splitlines()[-1]

    qa = run_cli(*args, "--benchmark", str(qa_file), "--fields",
                 "input=question,output=answer,split=part", "--splits", "train,test",
                 "--out", str(tmp_path / "qa"), "--template", layout, cwd=tmp_path)  # fmt: skip
    assert qa.returncode == 0, qa.stderr
    assert "ignored --template: it applies to mcq tasks; this is qa" in qa.stderr
