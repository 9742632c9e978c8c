"""The permutation command end to end on the tiny random model (real CLI, real files)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run_cli

ROWS = [
    "What is 2+2?,3,4,5,6,B",
    "Which planet is largest?,Mars,Venus,Jupiter,Earth,C",
    '"A question, with a comma",alpha,beta,gamma,delta,A',
    "Which of these are mammals?,Whale,Bat,Dog,All of the above,D",
    "Pick the colour of the sky,blue,green,red,yellow,A",
]


@pytest.fixture()
def bench(tmp_path: Path) -> Path:
    path = tmp_path / "toy_test.csv"
    path.write_text("\n".join(ROWS) + "\n", encoding="utf-8")
    return path


def test_run_writes_records_and_summary_then_resumes(
    tmp_path: Path, bench: Path, tiny_model_path: Path
) -> None:
    out = tmp_path / "run"
    args = [
        "permutation",
        "--model",
        f"hf:{tiny_model_path}",
        "--benchmark",
        str(bench),
        "--out",
        str(out),
        "--device",
        "cpu",
    ]
    first = run_cli(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    summary = json.loads((out / "summary.json").read_text())
    records = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    assert len(records) == 5
    assert summary["counts"]["items_analysed"] == 4
    assert summary["counts"]["excluded"] == {"options not exchangeable": 1}
    assert summary["benchmark"]["format"] == "mmlu-csv"
    rec = records[0]
    assert rec["id"] and rec["n_options"] == 4 and len(rec["orders"]) == 24 == len(rec["logprobs"])
    assert rec["orders"][0] == [0, 1, 2, 3]
    assert rec["prefix"] == "What is 2+2?:\n"
    assert rec["continuations"][0] == "A:3\nB:4\nC:5\nD:6\n"
    # the record's verdicts follow from its own numbers
    lp = rec["logprobs"]
    assert rec["rank"] == 1 + sum(v > lp[0] for v in lp[1:])
    assert rec["alg1"] == (rec["rank"] == 1 and lp.count(lp[0]) == 1)
    assert rec["p_value"] == pytest.approx(sum(v >= lp[0] for v in lp) / 24)
    assert "Algorithm 1" in first.stdout
    # the excluded item was finished, not scored (the line said "scored 5 items")
    assert "finished 5 items (1 of them excluded, not scored) in" in first.stdout
    assert summary["timings"]["items_excluded_now"] == 1
    assert summary["timings"]["scores_computed"] == 4 * 24

    # the model folder given without hf: is the same spec: the re-run resumes
    bare = [str(tiny_model_path) if a == f"hf:{tiny_model_path}" else a for a in args]
    again = run_cli(*bare, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    s2 = json.loads((out / "summary.json").read_text())
    assert s2["timings"]["items_scored_now"] == 0 and s2["timings"]["items_resumed"] == 5
    # the first run's timings are kept (a resume said 0 s and lost them)
    assert summary["timings"]["earlier"] == []
    assert summary["timings"]["device"] == "cpu" and summary["timings"]["executor"] == "local"
    assert s2["timings"]["earlier"] == [
        {k: v for k, v in summary["timings"].items() if k != "earlier"}
    ]
    third = run_cli(*bare, cwd=tmp_path)  # a resume that scored nothing adds no entry of zeros
    assert third.returncode == 0, third.stderr
    s3 = json.loads((out / "summary.json").read_text())
    assert s3["timings"]["earlier"] == s2["timings"]["earlier"]
    assert s2["statistics"] == summary["statistics"]
    assert (out / "items.jsonl").read_text().count("\n") == 5

    # another --alpha re-analyses the folder's records (it was refused as other settings), and
    # so does a folder written when settings.json held alpha
    settings = json.loads((out / "settings.json").read_text())
    assert "alpha" not in settings["config"] and summary["config"]["alpha"] == 0.05
    settings["config"]["alpha"] = 0.05
    (out / "settings.json").write_text(json.dumps(settings))
    strict = run_cli(*args, "--alpha", "0.01", cwd=tmp_path)
    assert strict.returncode == 0, strict.stderr
    s4 = json.loads((out / "summary.json").read_text())
    assert s4["timings"]["items_scored_now"] == 0 and s4["config"]["alpha"] == 0.01
    assert "alpha" not in json.loads((out / "settings.json").read_text())["config"]
    assert s4["statistics"]["alpha"] == 0.01 != summary["statistics"]["alpha"]

    # a new run folder with the same items reuses every cached score; a --sample larger than
    # the benchmark takes every item and says so
    third = run_cli(
        *args[:-4],
        "--out",
        str(tmp_path / "run2"),
        "--sample",
        "50",
        "--device",
        "cpu",
        cwd=tmp_path,
    )
    assert third.returncode == 0, third.stderr
    # the file it means is named (a sweep's reference benchmark read as the pairs' one; QA)
    said = " ".join(third.stderr.split())
    assert f"--sample 50 is more than the 5 items of {bench}; all are used" in said
    s3 = json.loads((tmp_path / "run2" / "summary.json").read_text())
    assert s3["timings"]["scores_computed"] == 0 and s3["timings"]["scores_from_cache"] == 96
    assert s3["statistics"] == summary["statistics"]


def test_malformed_rows_are_skipped_listed_and_exit_3(
    tmp_path: Path, bench: Path, tiny_model_path: Path
) -> None:
    bad = tmp_path / "bad_test.csv"
    bad.write_text(ROWS[0] + "\nonly,three,columns\n" + ROWS[1] + "\n", encoding="utf-8")
    out = tmp_path / "run"
    res = run_cli(
        "permutation",
        "--model",
        f"hf:{tiny_model_path}",
        "--benchmark",
        str(bad),
        "--format",
        "mmlu-csv",
        "--out",
        str(out),
        cwd=tmp_path,
    )
    assert res.returncode == 3, res.stderr
    assert f"{bad}:2" in res.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["rows_skipped"] == 1 and summary["counts"]["items_analysed"] == 2
    assert summary["skipped_rows"][0].startswith(f"{bad}:2")
    strict = run_cli(
        "permutation",
        "--model",
        f"hf:{tiny_model_path}",
        "--benchmark",
        str(bad),
        "--format",
        "mmlu-csv",
        "--out",
        str(tmp_path / "s"),
        "--strict",
        cwd=tmp_path,
    )
    assert strict.returncode == 2 and "Traceback" not in strict.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--format", "nonsense"], "nonsense"),
        (["--model", "gpt5"], "unknown model spec"),
        (["--ties", "maybe"], "--ties"),
        (["--deltas", "x,y"], "--deltas"),
        # inf passed the parse and was refused after the model had loaded, with settings.json
        # written (holding Infinity, which is not JSON)
        (["--deltas=-0.2,inf"], "--deltas '-0.2,inf': every threshold must be a finite number"),
        # beyond the outlier score's range: every item flagged, without a word (docs journey)
        (["--deltas", "5"], "--deltas 5: 5 is outside [-0.5, 0.5], where the outlier score lies"),
        # an empty value (an unset shell variable) ran the paper's thresholds unsaid (QA)
        (["--deltas="], "--deltas '': expected comma-separated numbers or 'paper'"),
        (["--template", "fancy"], "--template"),
        (["-M", "bogus=1"], "-M bogus"),
        (["--benchmark", "missing.csv"], "missing.csv"),
        # brackets in a path are text, not console markup
        (["--benchmark", "d[/]x[bold]y.csv"], "d[/]x[bold]y.csv: no such file"),
        (["-M", "attn=foo"], "-M attn=foo: expected sdpa or eager"),
        (["-M", "max_batch_tokens=0"], "-M max_batch_tokens=0: must be at least 64"),
        (["-M", "max_tree_nodes=x"], "-M max_tree_nodes=x: expected an integer"),
        (["-M", "trust_remote_code=maybe"], "-M trust_remote_code=maybe"),
        (["-M", "revision=v2"], "-M revision=v2: a revision picks a version of a hub model"),
        (["--out", "toy_test.csv"], "--out toy_test.csv: is a file, not a folder"),
        (["--out", "toy_test.csv/run"], "toy_test.csv is a file, not a folder"),
        (["--cache-dir", "toy_test.csv"], "--cache-dir toy_test.csv: is a file, not a folder"),
        # a cache folder that cannot be made (a read-only home) says the way round (CI QA)
        (["--cache-dir", "toy_test.csv/c"], "not a folder; use --no-cache or another --cache-dir"),
        (["--no-cache", "--cache-dir", "c"], "--no-cache and --cache-dir contradict"),
        # the flag silently won over -M (QA)
        (
            ["--max-batch-tokens", "128", "-M", "max_batch_tokens=256"],
            "--max-batch-tokens 128 and -M max_batch_tokens=256 contradict each other",
        ),
        (["--subjects", " , "], "--subjects ' , ' names no subject"),
        # usage errors found while parsing the command line: one line too, naming the help
        (["--seed", "-1"], "Invalid value for '--seed'"),
        (["--batch-items", "x"], "Invalid value for '--batch-items'"),
        (["--no-such-flag"], "No such option: --no-such-flag"),
        (["--seed", "-1"], "contamscope permutation --help')"),
    ],
)
def test_user_errors_are_one_line_without_traceback(
    tmp_path: Path, bench: Path, tiny_model_path: Path, args: list[str], needle: str
) -> None:
    base = {"--model": f"hf:{tiny_model_path}", "--benchmark": str(bench)}
    for flag in ("--model", "--benchmark"):
        if flag in args:
            base.pop(flag)
    argv = [
        "permutation",
        *[x for kv in base.items() for x in kv],
        "--out",
        str(tmp_path / "o"),
        *args,
    ]
    res = run_cli(*argv, cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], res.stderr
    assert not (tmp_path / "o" / "settings.json").exists()  # nothing written


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--model", "smollm3"], "unknown model spec 'smollm3'"),
        (["--model", "hf:/no/such/folder"], "--model hf:/no/such/folder: no such file or folder"),
        (["--dtype", "fp16"], "--dtype 'fp16': expected auto, float32, bfloat16, float16"),
        # a bare path that is not there said 'unknown model spec'
        (["--model", "./no-such-model"], "--model ./no-such-model: no such file or folder"),
        (["--model", "gone.gguf"], "--model gone.gguf: no such file or folder"),
        # a bare hub id: how to write it
        (["--model", "Qwen/Qwen2-0.5B"], "(a hub id takes hf:, as in hf:Qwen/Qwen2-0.5B)"),
        # a folder that is no model folder (a run folder) failed after the benchmark was read,
        # with transformers' "Couldn't instantiate the backend tokenizer ..."
        (["--model", "hf:./runs"], "--model hf:./runs: not a model folder (no config.json)"),
        (["--model", "./runs"], "--model hf:./runs: not a model folder (no config.json)"),
        (["--model", "./notes.txt"], "--model ./notes.txt: expected a model folder or a .gguf"),
        (
            ["--model", "./w"],
            "--model hf:./w: not a model folder (no config.json); it holds m.gguf",
        ),
    ],
)
def test_a_wrong_model_or_dtype_is_said_before_the_benchmark_is_read(
    tmp_path: Path, args: list[str], needle: str
) -> None:
    """The bundled MMLU's 'repeats: 106 items repeat ...' came first, and the error after it
    (journey audit)."""
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "items.jsonl").write_text("{}\n", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("a model?\n", encoding="utf-8")
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "m.gguf").write_bytes(b"GGUF")
    res = run_cli("permutation", "--benchmark", "mmlu", *args, cwd=tmp_path)
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    assert res.returncode == 2 and len(lines) == 1 and needle in lines[0], res.stderr


def test_help_has_examples_and_cache_commands(tmp_path: Path) -> None:
    res = run_cli("permutation", "--help", cwd=tmp_path)
    assert res.returncode == 0 and "Examples" in res.stdout and "--benchmark" in res.stdout
    # a flag is shown alone ("--strict <bool>" read as if a value followed); values keep types
    strict = next(ln for ln in res.stdout.splitlines() if "--strict" in ln)
    assert "<bool>" not in res.stdout and "<" not in strict and "<path>" in res.stdout
    for sub in (["--help"], ["cache", "--help"]):
        r = run_cli(*sub, cwd=tmp_path)
        assert r.returncode == 0 and "cache" in r.stdout, r.stdout
    for command in ("info", "clear", "repair", "export", "import"):
        r = run_cli("cache", command, "--help", cwd=tmp_path)
        assert r.returncode == 0 and "Example" in r.stdout, r.stdout
    info = run_cli("cache", "info", "--cache-dir", str(tmp_path / "c"), cwd=tmp_path)
    assert info.returncode == 0 and "empty" in info.stdout


def test_every_command_list_line_is_whole() -> None:
    """A command list shows the first paragraph of each command's help as typed: `cache
    --help` broke 'run it while no run / uses the cache' over two lines. Every command's
    first paragraph is one line."""
    import typer

    from contamscope.cli.main import app

    def commands(group: Any, path: str) -> list[tuple[str, Any]]:
        out = []
        for name, cmd in group.commands.items():
            out.append((f"{path} {name}", cmd))
            if hasattr(cmd, "commands"):  # a group (typer's own, not click's class)
                out += commands(cmd, f"{path} {name}")
        return out

    found = commands(typer.main.get_command(app), "contamscope")
    assert len(found) > 15
    for name, cmd in found:
        first = (cmd.help or "").strip().split("\n\n")[0]
        assert first and "\n" not in first, f"{name}: {first!r}"


def test_model_option_help_names_every_backend_option(tmp_path: Path) -> None:
    """-M's help listed 5 of 7 hf options and none of vllm's last four; benbench, cap,
    membership, sweep and validate said only 'key=value'."""
    from contamscope.backends import hf, openai_compat, vllm
    from contamscope.cli.common import MODEL_OPTIONS_HELP

    for backend, options in (
        ("hf:", hf.OPTIONS),
        ("openai:", openai_compat.OPTIONS),
        ("vllm:", vllm.OPTIONS),
    ):
        part = MODEL_OPTIONS_HELP.split(backend.rstrip(":") + ":")[1].split(". ")[0]
        assert sorted(o for o in options if f"{o}=" not in part) == [], backend

    def help_text(command: str) -> str:  # the help's words, box drawing aside
        out = run_cli(command, "--help", cwd=tmp_path).stdout
        return " ".join(out.replace("│", " ").split())

    for command in ("permutation", "benbench", "cap", "membership", "sweep", "validate"):
        text = help_text(command)
        assert "max_tree_nodes=N" in text and "enforce_eager=true" in text, command
    assert "pip install 'contamscope[ray]'" in help_text("cap")  # rich markup ate '[ray]'


def test_formats_lists_what_every_method_reads(tmp_path: Path) -> None:
    """`contamscope formats` listed the multiple-choice formats only; BenBench's (gsm8k-jsonl,
    math-jsonl, ...) and CAP's were in their commands' help alone."""
    from contamscope.data import FORMATS
    from contamscope.data.qa import QA_FORMATS

    res = run_cli("formats", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    names = [line.split()[0] for line in res.stdout.splitlines() if line.startswith("  ")]
    assert names == [*FORMATS, *QA_FORMATS]
    assert "question + answer (benbench):" in res.stdout and "\ncap: CAP folders" in res.stdout


@pytest.mark.parametrize("args", [("formats",), ("inspect", "--benchmark", "mmlu", "--json")])
def test_stdout_closed_early_ends_quietly_with_the_status_of_sigpipe(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    """``contamscope formats | head -1``: typer and rich ended with status 1 (reserved for a
    prompt answered no) and nothing said; a Unix tool ends with 141 (128 + SIGPIPE)."""
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written
    try:
        res = subprocess.run(
            [sys.executable, "-m", "contamscope", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            timeout=300,
        )
    finally:
        os.close(write)
    assert res.returncode == 141
    # nothing said but the bundled MMLU's note (one item's options carry their own labels)
    assert all(line.startswith("note: ") for line in res.stderr.splitlines()), res.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
def test_a_full_disk_under_stdout_is_one_line(tmp_path: Path) -> None:
    """``contamscope formats > /dev/full`` printed a traceback and exited 1 (docs QA)."""
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        res = subprocess.run(
            [sys.executable, "-m", "contamscope", "formats"],
            stdout=full, stderr=subprocess.PIPE, text=True, cwd=tmp_path, timeout=300,
        )  # fmt: skip
    assert res.returncode == 2
    assert res.stderr == "error: cannot write the output: No space left on device\n"


def test_repeated_items_are_named_and_drop_repeats_leaves_them_out(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    """MMLU's test set repeats 106 questions; each copy counted as evidence without a word."""
    path = tmp_path / "rep_test.csv"
    rows = [ROWS[0], ROWS[1], "what is  2+2?,6,5,4,3,C", ROWS[4]]  # row 3 repeats row 1
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    base = ["permutation", "--model", f"hf:{tiny_model_path}", "--benchmark", str(path)]
    kept = run_cli(*base, "--out", "kept", cwd=tmp_path)
    assert kept.returncode == 0, kept.stderr
    assert (
        "repeats: 1 item repeats the question and options of an earlier item "
        "(e.g. rep_test-2 repeats rep_test-0)"
    ) in kept.stderr
    assert "kept and counted; --drop-repeats leaves them out" in kept.stderr
    s = json.loads((tmp_path / "kept" / "summary.json").read_text())
    assert s["counts"]["items_analysed"] == 4 and s["counts"]["repeats_analysed"] == 1
    dropped = run_cli(*base, "--out", "dropped", "--drop-repeats", "--limit", "3", cwd=tmp_path)
    assert dropped.returncode == 0, dropped.stderr
    recs = (tmp_path / "dropped" / "items.jsonl").read_text().splitlines()
    ids = [json.loads(r)["id"] for r in recs]
    assert len(ids) == 3 and "rep_test-2" not in ids  # the repeat is left out before --limit
    # repeats outside the items run are not named (MMLU's 106 were named for a 5-item sample)
    two = run_cli(*base, "--out", "two", "--limit", "2", cwd=tmp_path)
    assert two.returncode == 0 and "repeats" not in two.stderr, two.stderr


def test_a_custom_template_is_used_recorded_and_held_on_resume(
    tmp_path: Path, bench: Path, tiny_model_path: Path
) -> None:
    layout = tmp_path / "layout.json"
    layout.write_text(
        json.dumps(
            {"question": "Question: {question}\nOptions:\n", "option": "({label}) {text}\n"}
        ),
        encoding="utf-8",
    )
    base = ["permutation", "--model", f"hf:{tiny_model_path}", "--benchmark", str(bench)]
    out = tmp_path / "run"
    res = run_cli(*base, "--out", str(out), "--limit", "2", "--template", str(layout), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    records = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    assert [r["prefix"] for r in records] == ["Question: What is 2+2?\nOptions:\n"] + [
        "Question: Which planet is largest?\nOptions:\n"
    ]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["template"]["option"] == "({label}) {text}\n"
    # the same layout typed inline resumes the run; another layout is refused, naming it
    inline = layout.read_text(encoding="utf-8")
    again = run_cli(*base, "--out", str(out), "--limit", "2", "--template", inline, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "resuming: 2 of 2 items already done" in again.stdout + again.stderr
    other = run_cli(*base, "--out", str(out), "--limit", "2", "--template", "mmlu", cwd=tmp_path)
    assert other.returncode == 2 and "config.template.option" in other.stderr


def test_options_with_their_own_labels_are_scored_without_them(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    """ "A. one" scored as "A:A. one" in the published order and "B:C. three" in others: only
    the published order's labels matched (a false leakage signal; QA)."""
    bench = tmp_path / "pre.csv"
    bench.write_text("Q1?,A. one,B. two,C. three,D. four,B\nQ2?,(A) w,(B) x,(C) y,(D) z,A\n")
    out = tmp_path / "run"
    res = run_cli("permutation", "--model", f"hf:{tiny_model_path}", "--benchmark", str(bench),
                  "--out", str(out), cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "note: options beginning with their own labels" in res.stderr
    records = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    assert [r["continuations"][0] for r in records] == ["A:one\nB:two\nC:three\nD:four\n",
                                                         "A:w\nB:x\nC:y\nD:z\n"]  # fmt: skip
    notes = json.loads((out / "summary.json").read_text())["benchmark"]["notes"]
    assert notes and "in 2 of the 2 items read" in notes[0]
    # a run scored before the labels were removed: its records are of "A:A. one", which a
    # resume kept and a summary said were scored without them (review QA)
    old = records[0] | {
        "continuations": [c.replace(":", ":X. ") for c in records[0]["continuations"]]
    }
    (out / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [old, records[1]]))
    re = run_cli("reanalyse", str(out), cwd=tmp_path)
    assert re.returncode == 0, re.stderr
    assert "1 stored record scored on other texts than" in " ".join(re.stderr.split())
    again = run_cli("permutation", "--model", f"hf:{tiny_model_path}", "--benchmark", str(bench),
                    "--out", str(out), cwd=tmp_path)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "(first: pre-0; e.g. labels its options carried, now removed): scored again" in (
        " ".join(again.stderr.split())
    )
    redone = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()]
    assert redone == records  # scored again as a fresh run scored it, in the items' order
    # every record stale: the new ones came in the items' order after the old ones, and
    # items.jsonl held both (diff-review QA)
    stale = [r | {"continuations": [c.replace(":", ":X. ") for c in r["continuations"]]}
             for r in records]  # fmt: skip
    (out / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in stale))
    third = run_cli("permutation", "--model", f"hf:{tiny_model_path}", "--benchmark", str(bench),
                    "--out", str(out), cwd=tmp_path)  # fmt: skip
    assert third.returncode == 0, third.stderr
    assert [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines()] == records


def test_plain_progress_lines_come_while_a_long_batch_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The plain lines were written only as a batch ended: a log stayed silent for the
    minutes a batch of 32 items of the real model took (upgrade QA). A clock of the bar's own
    writes them while nothing advances, and stops with the bar."""
    import time

    from contamscope.cli.common import quiet_progress

    monkeypatch.setenv("CONTAMSCOPE_PROGRESS_SECONDS", "0.2")
    with quiet_progress(auto_refresh=False) as bar:
        task = bar.add_task("scoring", total=4)
        time.sleep(1.5)  # one long batch: nothing advances
        bar.advance(task, 4)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("scoring: ")]
    assert len(lines) >= 3 and lines[0].startswith("scoring: 0/4, 0:00:00 elapsed"), lines
    time.sleep(0.5)  # stopped with the bar
    assert "scoring: " not in capsys.readouterr().err
    # a finished phase is not said again while the next runs (validate's epochs were)
    with quiet_progress(auto_refresh=False) as bar:
        first = bar.add_task("training", total=2)
        bar.advance(first, 2)
        capsys.readouterr()
        bar.add_task("scoring epoch-1", total=4)
        time.sleep(1.0)
    said = capsys.readouterr().err
    assert "scoring epoch-1: 0/4" in said and said.count("training: ") <= 1, said
    # as the display stops, where each task ended, once (a log got rich's bar there)
    # (training's 2/2 came too soon after its start to be said: it is said now, once, with
    # the time it took, not the time since)
    assert said.splitlines()[-1] == "training: 2/2, 0:00:00 elapsed", said


def test_progress_says_the_time_left_when_batches_come_minutes_apart(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """rich estimates the speed from the last 30 s of advances: with the real model's batches
    minutes apart it had none, and neither the bar nor the plain lines said a time left."""
    from contamscope.cli.common import quiet_progress

    now = [0.0]
    monkeypatch.setenv("CONTAMSCOPE_PROGRESS_SECONDS", "0")
    with quiet_progress(auto_refresh=False, get_time=lambda: now[0]) as bar:
        task = bar.add_task("scoring", total=6)
        for _ in range(3):
            now[0] += 120.0  # a batch of 2 items every 2 minutes
            bar.advance(task, 2)
        left = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("scoring: ")]
    assert "scoring: 4/6, 0:04:00 elapsed, 0:02:00 left" in left, left


def test_the_time_left_follows_the_pace_since_the_start_not_the_last_advances(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CAP batch ends in many small advances: rich's estimate from them said "0:00:01 left"
    and said it again a minute later with nothing advanced (HTTP QA). Items done when the task
    was added (a resumed run's) do not count to its pace."""
    from contamscope.cli.common import quiet_progress

    now = [0.0]
    monkeypatch.setenv("CONTAMSCOPE_PROGRESS_SECONDS", "0")
    with quiet_progress(auto_refresh=False, get_time=lambda: now[0]) as bar:
        task = bar.add_task("generating", total=6)
        now[0] = 59.0
        for _ in range(10):  # 3 items in fractions, in the batch's last second
            now[0] += 0.1
            bar.advance(task, 0.3)
        now[0] = 120.0
        bar.advance(task, 0)  # (as the clock says it: nothing more done)
        resumed = bar.add_task("resumed", total=10, completed=4)
        now[0] = 180.0
        bar.advance(resumed, 2)  # 2 items in the 60 s since it was added
        said = capsys.readouterr().err.splitlines()
    assert "generating: 3/6, 0:01:00 elapsed, 0:01:00 left" in said, said
    assert "generating: 3/6, 0:02:00 elapsed, 0:02:00 left" in said, said
    assert "resumed: 6/10, 0:01:00 elapsed, 0:02:00 left" in said, said


def test_a_log_file_gets_plain_progress_lines(
    tmp_path: Path, bench: Path, tiny_model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where stderr is not a terminal rich draws the bar only when it stops: a log showed
    nothing of a run until its end (unattended-operator QA). A plain line now comes every
    CONTAMSCOPE_PROGRESS_SECONDS (here 0: every batch)."""
    import re

    monkeypatch.setenv("CONTAMSCOPE_PROGRESS_SECONDS", "0")
    args = ["--model", f"hf:{tiny_model_path}", "--benchmark", str(bench), "--batch-items", "1"]
    res = run_cli("permutation", *args, "--out", str(tmp_path / "r"), cwd=tmp_path, columns=None)
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("scoring: ")]
    done = [
        int(m.group(1))
        for ln in lines
        if (m := re.match(r"scoring: (\d)/5, \d:\d\d:\d\d elapsed", ln))
    ]
    assert len(done) == len(lines) >= 3 and done == sorted(done) and done[-1] == 5
    assert "━" not in res.stderr  # a log gets the plain lines alone (rich drew its bar once)
    monkeypatch.setenv("CONTAMSCOPE_PROGRESS_SECONDS", "soon")
    res = run_cli("permutation", *args, "--out", str(tmp_path / "s"), cwd=tmp_path, columns=None)
    assert res.returncode == 2
    assert "CONTAMSCOPE_PROGRESS_SECONDS='soon': expected a number of seconds" in res.stderr


def test_the_printed_report_command_runs_as_pasted(
    tmp_path: Path, bench: Path, tiny_model_path: Path
) -> None:
    """`report: contamscope report /x/a b` was printed bare: pasted, it was two arguments."""
    import shlex

    out = tmp_path / "a b" / "ü 数据"
    args = ["--model", f"hf:{tiny_model_path}", "--benchmark", str(bench), "--out", str(out)]
    res = run_cli("permutation", *args, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    [line] = [ln for ln in res.stdout.splitlines() if ln.startswith("report: ")]
    command = shlex.split(line.removeprefix("report: "))
    assert command == ["contamscope", "report", str(out)]
    made = run_cli(*command[1:], cwd=tmp_path)
    assert made.returncode == 0, made.stderr and (out / "report.html").is_file()


def test_the_same_benchmark_by_another_path_resumes_and_reanalyses_from_anywhere(
    tmp_path: Path, bench: Path, tiny_model_path: Path
) -> None:
    """A run given its benchmark by a relative path resumes when given the same file by its
    absolute path, or from another folder, and is re-analysed from anywhere (it was refused
    as "a run with other settings (benchmark: 'toy_test.csv' -> '/.../toy_test.csv')", and
    reanalyse looked for the file relative to where it was started; QA). Folders that
    recorded the path as typed (before) resume too; another file is still refused."""
    out = tmp_path / "run"
    model = ["--model", f"hf:{tiny_model_path}", "--device", "cpu", "--out", str(out)]
    first = run_cli("permutation", "--benchmark", bench.name, *model, cwd=bench.parent)
    assert first.returncode == 0, first.stderr
    settings = json.loads((out / "settings.json").read_text())
    assert settings["benchmark"] == str(bench)  # absolute, though typed relative
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = run_cli("permutation", "--benchmark", str(bench), *model, cwd=elsewhere)
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "summary.json").read_text())["timings"]["items_resumed"] == 5
    res = run_cli("reanalyse", str(out), "--alpha", "0.1", cwd=elsewhere)
    assert res.returncode == 0, res.stderr
    # a folder an earlier version wrote, with the path as typed
    settings["benchmark"] = bench.name
    (out / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    rel = "../" + bench.name
    again = run_cli("permutation", "--benchmark", rel, *model, "--alpha", "0.1", cwd=elsewhere)
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "summary.json").read_text())["timings"]["items_resumed"] == 5
    other = tmp_path / "other_test.csv"
    other.write_text("\n".join(ROWS[:4]) + "\n", encoding="utf-8")
    refused = run_cli("permutation", "--benchmark", str(other), *model, cwd=elsewhere)
    assert refused.returncode == 2 and "holds a run with other settings" in refused.stderr
