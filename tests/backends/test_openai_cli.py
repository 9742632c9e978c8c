"""`contamscope permutation --model openai:...` end to end: the server dies mid-run, the run
resumes against a restarted server, and every record equals the local backend's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run_cli
from toy_rows import word_rows

ROWS = [
    "What is 2+2?,3,4,5,6,B",
    "Which planet is largest?,Mars,Venus,Jupiter,Earth,C",
    '"A question, with a comma",alpha,beta,gamma,delta,A',
    "Pick the colour of the sky,blue,green,red,yellow,A",
]


def records(folder: Path) -> dict[str, dict[str, Any]]:
    rows = [json.loads(x) for x in (folder / "items.jsonl").read_text().splitlines()]
    return {r["id"]: r for r in rows}


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, abs=1e-3)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def test_server_dies_mid_run_resume_and_equal_to_local(
    tmp_path: Path, serve: Any, tiny_model_path: Path
) -> None:
    bench = tmp_path / "toy_test.csv"
    bench.write_text("\n".join(ROWS) + "\n", encoding="utf-8")
    # the probe sends 4 POSTs; each item 24: the server dies during the third item
    server = serve("--die-after", "60")
    port = server.port
    common = ["--benchmark", str(bench), "--batch-items", "1"]
    spec = f"openai:{server.url}#tiny"
    opts = ["-M", "bos=<|endoftext|>", "-M", "canary=structural", "-M", "max_connections=4"]
    out = tmp_path / "remote"
    args = ["permutation", "--model", spec, *opts, *common, "--out", str(out)]
    first = run_cli(*args, "-M", "retries=1", "-M", "backoff=0.01", cwd=tmp_path)
    assert first.returncode == 2, first.stderr
    assert "Traceback" not in first.stderr
    assert "scoring request" in first.stderr and "failed after 2 attempts" in first.stderr
    assert "once the server answers again, the same run resumes" in " ".join(first.stderr.split())
    assert len(records(out)) == 2  # items finished before the server died are kept

    serve(port=port)  # the same server, restarted
    second = run_cli(*args, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "resuming: 2 of 4 items already done" in second.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["timings"]["items_resumed"] == 2

    local = tmp_path / "local"
    res = run_cli(
        "permutation",
        "--model",
        f"hf:{tiny_model_path}",
        "-M",
        "bos=<|endoftext|>",
        "--device",
        "cpu",
        *common,
        "--out",
        str(local),
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    remote, here = records(out), records(local)
    assert remote.keys() == here.keys()
    for key in remote:
        a = {k: v for k, v in remote[key].items() if k != "seconds"}
        b = {k: v for k, v in here[key].items() if k != "seconds"}
        assert same(a, b), key
    s_local = json.loads((local / "summary.json").read_text())
    assert same(summary["statistics"], s_local["statistics"])


def test_a_run_resumed_after_the_server_changed_its_model_is_refused(
    tmp_path: Path, serve: Any
) -> None:
    """A server is known by its URL, name and /models entry: a run resumed after it began
    serving another checkpoint finished with two models' numbers in one folder, exit 0 (chaos
    QA). A finished item is scored again first; the items kept stay."""
    bench = tmp_path / "toy_test.csv"
    bench.write_text("\n".join(ROWS) + "\n", encoding="utf-8")
    server = serve("--die-after", "60")  # the probe's 4 POSTs, then 24 per item: 2 finish
    spec = f"openai:{server.url}#tiny"
    opts = ["-M", "bos=<|endoftext|>", "-M", "canary=structural", "--no-cache"]
    out = tmp_path / "run"
    args = ["permutation", "--model", spec, *opts, "--benchmark", str(bench), "--out", str(out)]
    first = run_cli(*args, "--batch-items", "1", "-M", "retries=0", cwd=tmp_path)
    assert first.returncode == 2 and len(records(out)) == 2, first.stderr
    kept = (out / "items.jsonl").read_text()
    serve("--lp-offset", "-0.2", port=server.port)  # another model, the same name
    second = run_cli(*args, "--batch-items", "1", cwd=tmp_path)
    assert second.returncode == 2, second.stderr
    said = " ".join(second.stderr.split())
    assert f"error: {out}: the server now scores item" in said, said
    assert "0.200 nats per token apart; 0.05 allowed" in said
    assert (out / "items.jsonl").read_text() == kept  # nothing lost, nothing mixed in


QA_ROWS = [
    {"question": "What is three plus four? Give the number.", "answer": "Seven, so it is 7."},
    {"question": "Name the largest planet of the solar system.", "answer": "It is Jupiter."},
    {"question": "Who wrote the play Hamlet?", "answer": "William Shakespeare wrote it."},
]


@pytest.mark.parametrize("method", ["benbench", "membership"])
def test_other_methods_resumed_after_the_server_changed_its_model_are_refused(
    tmp_path: Path, serve: Any, method: str
) -> None:
    """As the permutation test's: a BenBench or membership run resumed after the server began
    serving another checkpoint under the same name mixed two models' numbers, exit 0 (they did
    not check). A finished item is scored again first; the same server's resume goes on."""
    if method == "benbench":
        bench = tmp_path / "toy_test.jsonl"
        bench.write_text("".join(json.dumps(r) + "\n" for r in QA_ROWS), encoding="utf-8")
        extra = ["--no-lenient"]
        first_id = "test/toy_test-0"
    else:
        bench = tmp_path / "toy_test.csv"
        bench.write_text("\n".join(ROWS) + "\n", encoding="utf-8")
        ref = tmp_path / "fresh.csv"
        ref.write_text("\n".join(word_rows(12)) + "\n", encoding="utf-8")
        extra = ["--reference", str(ref), "--statistic", "min_k", "--bootstrap", "200"]
        first_id = "benchmark/toy_test-0"
    server = serve()
    spec = f"openai:{server.url}#tiny"
    opts = ["-M", "bos=<|endoftext|>", "-M", "canary=structural", "--no-cache"]
    out = tmp_path / "run"
    args = [method, "--model", spec, *opts, "--benchmark", str(bench), *extra, "--out", str(out)]
    whole = run_cli(*args, cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    full = (out / "items.jsonl").read_text().splitlines(keepends=True)
    # a run stopped after its first item (as by a kill: no summary yet)
    (out / "items.jsonl").write_text(full[0], encoding="utf-8")
    (out / "summary.json").unlink()
    server.stop()
    other = serve("--lp-offset", "-0.2", port=server.port)  # another model, the same name
    refused = run_cli(*args, cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    said = " ".join(refused.stderr.split())
    assert f"error: {out}: the server now scores item {first_id!r} otherwise" in said, said
    assert "0.200 nats per token apart; 0.05 allowed" in said
    assert (out / "items.jsonl").read_text() == full[0]  # nothing lost, nothing mixed in
    other.stop()
    serve(port=server.port)  # the first model again: the run resumes
    resumed = run_cli(*args, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert len(records(out)) == len(full)
    assert json.loads((out / "summary.json").read_text())["timings"]["items_resumed"] == 1


def test_chat_only_server_refused_before_any_work(tmp_path: Path, serve: Any) -> None:
    bench = tmp_path / "toy_test.csv"
    bench.write_text("\n".join(ROWS) + "\n", encoding="utf-8")
    server = serve("--chat-only")
    res = run_cli(
        "permutation",
        "--model",
        f"openai:{server.url}#tiny",
        "--benchmark",
        str(bench),
        "--out",
        str(tmp_path / "r"),
        cwd=tmp_path,
    )
    assert res.returncode == 2
    line = res.stderr.strip()
    assert "\n" not in line and "chat-only API" in line and "can run: CAP" in line
    assert not (tmp_path / "r" / "items.jsonl").exists()


def test_methods_scoring_from_the_first_token_need_a_bos_before_any_work(
    tmp_path: Path, serve: Any
) -> None:
    """membership and BenBench score texts from their first token; without -M bos they failed
    once scoring started (after loading and the canary)."""
    bench = tmp_path / "toy_test.csv"
    bench.write_text("\n".join(ROWS) + "\n", encoding="utf-8")
    ref = tmp_path / "fresh.csv"
    ref.write_text("Name a colour?,red,dog,cat,cow,A\nName a fruit?,apple,car,bus,van,A\n")
    gsm = tmp_path / "gsm-test.jsonl"
    gsm.write_text(json.dumps({"question": "Tom has 3 apples and buys 4.", "answer": "7\n#### 7"}))
    server = serve()
    model = ["--model", f"openai:{server.url}#tiny", "-M", "canary=structural"]
    runs = {
        "membership": ["membership", *model, "--benchmark", str(bench), "--reference", str(ref)],
        "BenBench": ["benbench", *model, "--benchmark", str(gsm), "--no-lenient"],
    }
    for method, args in runs.items():
        out = tmp_path / method
        res = (
            run_cli(*args, "--statistic", "loss", "--out", str(out), cwd=tmp_path)
            if (method == "membership")
            else run_cli(*args, "--out", str(out), cwd=tmp_path)
        )
        assert res.returncode == 2, res.stderr
        line = res.stderr.strip().splitlines()[-1]
        assert method in line and "needs a BOS token" in line and "-M bos=" in line
        assert not (out / "items.jsonl").exists()
    # with the BOS named, membership runs
    res = run_cli(
        *runs["membership"],
        "-M",
        "bos=<|endoftext|>",
        "--statistic",
        "loss",
        "--out",
        str(tmp_path / "ok"),
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr


def test_membership_on_an_echo_only_server_equals_local(
    tmp_path: Path, serve: Any, tiny_model_path: Path
) -> None:
    """A server that answers only echo (token strings and log-probs, no ids) runs the membership
    test with a statistic that needs per-token log-probs only; every record equals the local
    backend's. The default Min-K%++ needs the vocabulary and is refused in one line that names
    a statistic that works."""
    bench = tmp_path / "toy_test.csv"
    bench.write_text("\n".join(ROWS) + "\n", encoding="utf-8")
    ref = tmp_path / "fresh.csv"
    ref.write_text("Name a colour?,red,dog,cat,cow,A\nName a fruit?,apple,car,bus,van,A\n")
    server = serve("--no-prompt-logprobs")
    remote = ["--model", f"openai:{server.url}#tiny", "-M", "canary=structural"]
    common = ["--benchmark", str(bench), "--reference", str(ref), "-M", "bos=<|endoftext|>"]
    refused = run_cli("membership", *remote, *common, "--out", str(tmp_path / "no"), cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    line = refused.stderr.strip().splitlines()[-1]
    assert "vocabulary" in line and "--statistic min_k" in line
    assert not (tmp_path / "no" / "items.jsonl").exists()

    runs = {"remote": remote, "local": ["--model", f"hf:{tiny_model_path}", "--device", "cpu"]}
    for name, model in runs.items():
        res = run_cli(
            "membership",
            *model,
            *common,
            "--statistic",
            "min_k",
            "--out",
            str(tmp_path / name),
            cwd=tmp_path,
        )
        assert res.returncode == 0, res.stderr
    got, want = records(tmp_path / "remote"), records(tmp_path / "local")
    assert len(got) == 6 and got.keys() == want.keys()
    for key in want:  # the local backend also records Min-K%++, which echo cannot give
        assert got[key]["statistics"].pop("min_k_pp") is None
        assert want[key]["statistics"].pop("min_k_pp") is not None
        assert same(got[key]["statistics"], want[key]["statistics"]), key
        assert got[key]["n_tokens"] == want[key]["n_tokens"]
    summaries = [json.loads((tmp_path / n / "summary.json").read_text()) for n in runs]
    assert same(
        summaries[0]["statistics"]["dataset_test"], summaries[1]["statistics"]["dataset_test"]
    )


def test_inspect_measures_a_served_model_by_orders(tmp_path: Path, tiny_server: Any) -> None:
    """A served model has no tokenizer here: --measure scales the sample's time by orders."""
    bench = tmp_path / "toy_test.csv"
    bench.write_text("\n".join(ROWS) + "\n", encoding="utf-8")
    spec = f"openai:{tiny_server.url}#tiny"
    opts = ["-M", "bos=<|endoftext|>", "-M", "canary=structural"]
    got = run_cli(
        "inspect", "-b", str(bench), "-m", spec, *opts, "--measure", "2", "--json", cwd=tmp_path
    )
    assert got.returncode == 0, got.stderr
    found = json.loads(got.stdout)
    timed = found["time"]
    assert found["tokens"] is None and timed["basis"] == "orders"
    assert timed["device"] == "a served model" and timed["orders"] == 48
    assert timed["run_cost"] == found["orders"]["total"] == 4 * 24
    assert timed["scoring_seconds"] == pytest.approx(timed["seconds"] * 2)
    assert timed["detectors_inline"] is False
    assert timed["estimate_seconds"] == pytest.approx(timed["scoring_seconds"])
    # counting tokens needs a tokenizer, which a served model does not give
    bare = run_cli("inspect", "-b", str(bench), "-m", spec, cwd=tmp_path)
    assert bare.returncode == 2 and "tokenizer is not available here" in bare.stderr


def test_cap_on_a_chat_only_server_asks_for_chat(tmp_path: Path, serve: Any) -> None:
    """CAP generates only, but through /completions unless --chat: on a chat-only API a qa run
    failed on its first request with 'HTTP 404: not found' (QA). It now says to give --chat,
    which runs."""
    data = tmp_path / "capqa"
    data.mkdir()
    for split, years in (("train", range(2000, 2003)), ("test", range(2010, 2013))):
        rows = [{"input": f"What was revenue in {y}?", "output": str(y - 1990)} for y in years]
        (data / f"ori_{split}.json").write_text(json.dumps(rows), encoding="utf-8")
    server = serve("--chat-only")
    args = ["cap", "--model", f"openai:{server.url}#tiny", "--benchmark", str(data),
            "--max-new-tokens", "4", "--no-plot", "--no-cache"]  # fmt: skip
    res = run_cli(*args, "--out", str(tmp_path / "plain"), cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    said = " ".join(res.stderr.split())
    assert "the server has no /completions endpoint" in said and "CAP does with --chat" in said
    # multiple choice too, where the optional log-likelihood reader's probe finds the server
    # chat-only first: generation went on through /chat/completions with "chat": false (QA)
    mcq = tmp_path / "capmcq"
    mcq.mkdir()
    head = "请回答选择题，从选项A，B，C，D中选择，回答问题。\n问题: "
    for split in ("dev", "val"):
        rows = [
            {"input": f"{head}{split} {k}+{k}=____。\n 选项：['A':{k}, 'B': {2 * k}, 'C':{k + 1},"
             f" 'D':{k + 3}]\n 答案： ", "output": "B"}
            for k in range(1, 4)
        ]  # fmt: skip
        (mcq / f"ori_{split}.json").write_text(json.dumps(rows), encoding="utf-8")
    margs = ["cap", "--model", f"openai:{server.url}#tiny", "--benchmark", str(mcq),
             "--splits", "dev,val", "--no-plot", "--no-cache"]  # fmt: skip
    res = run_cli(*margs, "--out", str(tmp_path / "mcq"), cwd=tmp_path)
    said = " ".join(res.stderr.split())
    assert res.returncode == 2 and "CAP does with --chat" in said, res.stderr
    res = run_cli(*args, "--chat", "--out", str(tmp_path / "chat"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    summary = json.loads((tmp_path / "chat" / "summary.json").read_text(encoding="utf-8"))
    assert summary["counts"]["train"]["analysed"] == 3
    # on Ray the workers sent the requests without the canary this process runs (a CAP run
    # read log-probs it had refused, a chat-only server failed, QA): served models run here
    ray = ["--executor", "ray", "--ray-address", "auto", "--workers", "2"]  # refused (review)
    res = run_cli(*args, "--chat", *ray, "--out", str(tmp_path / "ray"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    said = " ".join(res.stderr.split())
    assert "note: --executor ray: a served model (openai:) computes on its server" in said
    assert "--ray-address, --workers ignored" in said
    on_ray = json.loads((tmp_path / "ray" / "summary.json").read_text(encoding="utf-8"))
    assert on_ray["statistics"] == summary["statistics"]


def test_a_reply_under_another_model_name_is_one_note_and_recorded(
    tmp_path: Path, serve: Any
) -> None:
    bench = tmp_path / "toy_test.csv"
    bench.write_text("\n".join(ROWS[:1]) + "\n", encoding="utf-8")
    server = serve("--answer-as", "tiny-fallback")
    opts = ["-M", "bos=<|endoftext|>", "-M", "canary=structural"]
    out = tmp_path / "run"
    args = ["permutation", "--model", f"openai:{server.url}#tiny", *opts, "--benchmark", str(bench)]
    res = run_cli(*args, "--out", str(out), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    notes = [x for x in res.stderr.splitlines() if "answered as model" in x]
    assert len(notes) == 1 and notes[0].startswith("note: openai:"), res.stderr
    assert "'tiny-fallback', not 'tiny'" in notes[0]
    model = json.loads((out / "summary.json").read_text(encoding="utf-8"))["model"]
    assert model["answered_as"] == {"tiny-fallback": server.stats()["posts"]}


def test_benbench_on_a_served_model_equals_local_and_decodes_in_parallel(
    tmp_path: Path, serve: Any, tiny_model_path: Path
) -> None:
    """BenBench's /detokenize requests went one after another (80 for 4 items; chaos QA): they
    go max_connections at a time now, and the records equal the local backend's."""
    gsm = tmp_path / "gsm-test.jsonl"
    rows = [
        {"question": f"Tom has {i} apples and buys {i + 3} more, then eats one of them.",
         "answer": f"He has {i} + {i + 3} = {2 * i + 3} apples, eats one: {2 * i + 2}.\n#### {2 * i + 2}"}
        for i in range(3)
    ]  # fmt: skip
    gsm.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    server = serve("--delay", "0.05")
    common = ["--benchmark", str(gsm), "--no-lenient", "--no-cache", "-M", "bos=<|endoftext|>"]
    remote = tmp_path / "remote"
    res = run_cli(
        "benbench", "--model", f"openai:{server.url}#tiny", "-M", "canary=structural",
        "-M", "max_connections=4", *common, "--out", str(remote), cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode in (0, 3), res.stderr
    assert server.stats()["max_in_flight_by_path"]["/detokenize"] == 4
    local = tmp_path / "local"
    res = run_cli(
        "benbench", "--model", f"hf:{tiny_model_path}", "--device", "cpu", *common,
        "--out", str(local), cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode in (0, 3), res.stderr
    a, b = records(remote), records(local)
    assert a.keys() == b.keys() and a
    for key in a:
        got = [v.get("ngram") for v in a[key]["versions"]]
        want = [v.get("ngram") for v in b[key]["versions"]]
        assert got == want, key  # starts, texts and each start's original/predicted/match
