"""`contamscope validate --method benbench|cap` end to end on the tiny random model (real CLI)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run_cli

from contamscope.detectors.cap import pcr
from contamscope.validate import auc, binary_metrics

PROBLEMS = [
    ("Tom has 3 apples and buys 4 more. How many apples does he have?", "3 + 4 = 7", 7),
    ("A box holds 6 pens. How many pens are in 2 boxes?", "6 * 2 = 12", 12),
    ("Sara reads 5 pages a day for 3 days. How many pages?", "5 * 3 = 15", 15),
    ("There are 10 birds and 4 fly away. How many are left?", "10 - 4 = 6", 6),
    ("A cake is cut into 8 slices and 3 are eaten. How many remain?", "8 - 3 = 5", 5),
    ("Ben saves 2 dollars a week for 9 weeks. How much does he save?", "2 * 9 = 18", 18),
    ("A bus has 20 seats and 7 are taken. How many are free?", "20 - 7 = 13", 13),
]

MCQ = [
    ("Which gas do plants absorb", "CO2", "oxygen", "nitrogen", "helium", "A"),
    ("What is the capital of France", "Rome", "Paris", "Oslo", "Bern", "B"),
    ("Which metal is liquid at room temperature", "iron", "mercury", "tin", "lead", "B"),
    ("How many legs has a spider", "six", "eight", "ten", "four", "B"),
    ("Which planet is largest", "Mars", "Venus", "Jupiter", "Earth", "C"),
    ("What colour is the sky on a clear day", "blue", "green", "red", "yellow", "A"),
    ("Which animal is a mammal", "whale", "shark", "trout", "eel", "A"),
    ("What do bees make", "honey", "milk", "silk", "paper", "A"),
    ("Which number is even", "3", "5", "8", "9", "C"),
    ("Which is a fruit", "carrot", "apple", "potato", "onion", "B"),
]


def _common(model: Path, out: Path) -> list[str]:
    return [
        "--model",
        f"hf:{model}",
        "-M",
        "bos=<|endoftext|>",
        "--epochs",
        "1",
        "--lr",
        "3e-3",
        "--out",
        str(out),
        "--device",
        "cpu",
    ]


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture()
def gsm8k_file(tmp_path: Path) -> Path:
    path = tmp_path / "test.jsonl"
    rows = [{"question": q, "answer": f"{a}\n#### {n}"} for q, a, n in PROBLEMS]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture()
def mcq_folder(tmp_path: Path) -> Path:
    root = tmp_path / "mcq"
    for split, rows in (("dev", MCQ[:5]), ("test", MCQ[5:])):
        (root / split).mkdir(parents=True)
        text = "\n".join(",".join(r) for r in rows) + "\n"
        (root / split / f"toy_{split}.csv").write_text(text, encoding="utf-8")
    return root


def test_benbench_validation_end_to_end_and_reuse(
    tmp_path: Path, gsm8k_file: Path, tiny_model_path: Path
) -> None:
    out = tmp_path / "val-bb"
    args = [
        "validate",
        "--method",
        "benbench",
        "--benchmark",
        str(gsm8k_file),
        "--n-items",
        "6",
        *_common(tiny_model_path, out),
    ]
    first = run_cli(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "Traceback" not in first.stderr
    assert "training a copy on 3 leaked items" in first.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["validated_method"] == "benbench"
    assert summary["split"] == {"n_items": 6, "n_leaked": 3, "n_clean": 3, "file": "split.json"}
    assert [r["epochs"] for r in summary["results"]] == [0, 1]
    assert set(summary["detectors"]) >= {"ngram-exact-all", "ngram-rouge-all", "perplexity"}
    split = json.loads((out / "split.json").read_text())
    leaked = set(split["leaked"])
    assert len(leaked) == 3 and not leaked & set(split["clean"])

    for res in summary["results"]:
        recs = _records(out / res["run"] / "items.jsonl")
        assert len(recs) == 6 and not any(r.get("excluded") for r in recs)
        labels = [r["item_id"] in leaked for r in recs]
        # the exact-match detector recomputed from the stored records
        flags = [r["flags"]["exact_all"] for r in recs]
        acc = [r["metrics"]["original"]["ngram_exact"] for r in recs]
        assert res["detectors"]["ngram-exact-all"] == binary_metrics(flags, labels, acc).to_dict()
        ppl = [r["metrics"]["original"]["ppl"] for r in recs]
        assert res["scores"]["perplexity"]["auc"] == auc([-p for p in ppl], labels)
        gap = res["gaps"]["ppl"]
        lk = [p for p, y in zip(ppl, labels) if y]
        cl = [p for p, y in zip(ppl, labels) if not y]
        assert math.isclose(gap["gap"], sum(lk) / 3 - sum(cl) / 3)
        # 3 + 3 items: no bootstrap interval (it printed one; QA), and the note says why
        assert gap["ci"] is None and "(3 leaked, 3 clean)" in gap["ci_note"]
    # training lowered the leaked answers' NLL more than the clean ones'
    n0, n1 = summary["results"][0]["gaps"]["nll"], summary["results"][1]["gaps"]["nll"]
    assert n1["leaked"] - n0["leaked"] < n1["clean"] - n0["clean"]
    assert "ngram-exact-all" in first.stdout and "answer perplexity" in first.stdout
    assert "[no CI: < 5 a group]" in first.stdout
    assert (out / "validation.png").stat().st_size > 1000

    again = run_cli(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "training a copy" not in again.stderr
    summary2 = json.loads((out / "summary.json").read_text())
    assert summary2["results"] == summary["results"]
    assert summary2["training"] == summary["training"]


def test_cap_validation_end_to_end_and_reuse(
    tmp_path: Path, mcq_folder: Path, tiny_model_path: Path
) -> None:
    out = tmp_path / "val-cap"
    args = [
        "validate",
        "--method",
        "cap",
        "--benchmark",
        str(mcq_folder),
        "--splits",
        "dev,test",
        "--train-split",
        "test",
        "--n-items",
        "4",
        *_common(tiny_model_path, out),
    ]
    first = run_cli(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "Traceback" not in first.stderr
    assert "training a copy on 4 leaked items" in first.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["validated_method"] == "cap"
    assert summary["expected_verdict"] == "contaminated by test"
    assert summary["split"]["trained_split"] == "test"
    # the analysis settings the docs quote, beside the scoring ones (in each epoch's only; QA)
    cap_config = summary["config"]["cap"]
    assert (cap_config["alpha"], cap_config["scale"], cap_config["n_boot"]) == (0.01, "tanh", 2000)
    assert (summary["split"]["n_leaked"], summary["split"]["n_clean"]) == (4, 4)
    split = json.loads((out / "split.json").read_text())
    assert all(i.startswith("toy_test") for i in split["leaked"])
    assert all(i.startswith("toy_dev") for i in split["clean"])
    assert [r["epochs"] for r in summary["results"]] == [0, 1]
    for res in summary["results"]:
        assert set(res["readers"]) == {"generate", "loglik"}
        recs = _records(out / res["run"] / "items.jsonl")
        assert {r["split"] for r in recs} == {"dev", "test"} and len(recs) == 8
        for r in res["readers"].values():
            assert r["names_trained_split"] == (r["verdict"] == "contaminated by test")
            assert r["verdict"] in (
                "contaminated by test",
                "fine-tuned on dev",
                "no evidence",
                "inconclusive",
            )
            # inconclusive exactly when a split had no right and no consistent answer
            blank = [v["n"] and not (v["m"] or v["c"]) for v in r["splits"].values()]
            assert (r["verdict"] == "inconclusive") == any(blank)
        # generation reader's PCR recomputed from the stored records
        for s in ("dev", "test"):
            part = [r for r in recs if r["split"] == s]
            m = sum(r["m"] for r in part) / len(part)
            c = sum(r["c"] for r in part) / len(part)
            got = res["readers"]["generate"]["splits"][s]
            assert math.isclose(got["m"], m) and math.isclose(got["c"], c)
            assert math.isclose(got["pcr"], pcr(m, c))
        assert res["verdict"] == res["readers"]["generate"]["verdict"]
        # beyond the paper: the same comparison on M - C, from the same split numbers
        for r in res["readers"].values():
            sp, ex = r["splits"], r["excess"]
            want = (sp["dev"]["m"] - sp["dev"]["c"]) - (sp["test"]["m"] - sp["test"]["c"])
            assert math.isclose(ex["diff"], want, abs_tol=1e-12)
            assert ex["names_trained_split"] == (ex["verdict"] == "contaminated by test")
    assert "names trained split" in first.stdout
    assert "M-C verdict" in first.stdout
    # the copy was trained on the test items' answer letters: their log-likelihood accuracy rose
    ll0 = summary["results"][0]["readers"]["loglik"]["splits"]["test"]["m"]
    ll1 = summary["results"][1]["readers"]["loglik"]["splits"]["test"]["m"]
    assert ll1 >= ll0

    again = run_cli(*args, cwd=tmp_path, columns="140")
    assert again.returncode == 0, again.stderr
    assert "training a copy" not in again.stderr
    assert json.loads((out / "summary.json").read_text())["results"] == summary["results"]
    # a narrower terminal wraps the tables' cells, never cuts a word ('inconclusi…'; QA)
    assert "…" not in again.stdout, again.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--method", "cap", "--splits", "dev"], "--splits 'dev': give exactly two splits"),
        (["--method", "cap", "--splits", "dev,test", "--train-split", "val"], "--train-split"),
        (["--method", "benbench", "--n-items", "50"], "only 7 usable items in the benchmark\n"),
    ],
)
def test_method_user_errors_are_one_line(
    tmp_path: Path,
    gsm8k_file: Path,
    mcq_folder: Path,
    tiny_model_path: Path,
    extra: list[str],
    message: str,
) -> None:
    bench = mcq_folder if "cap" in extra else gsm8k_file
    model = f"hf:{tiny_model_path}"  # checked first: these errors come before it loads
    res = run_cli("validate", "--model", model, "--benchmark", str(bench), *extra, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr
    assert "Traceback" not in res.stderr
    # the error alone: no empty line first (a progress display that never showed a bar
    # printed one as it stopped; QA)
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1, repr(res.stderr)


def test_options_of_another_method_are_named_as_ignored(tmp_path: Path) -> None:
    """--scenario, --template, ... with --method benbench, or --template with cap, went
    straight to loading the model, unsaid (cap's own command names them)."""
    bench = tmp_path / "qa.jsonl"
    bench.write_text(json.dumps({"question": "Q?", "answer": "#### 1"}) + "\n", encoding="utf-8")
    res = run_cli("validate", "--method", "benbench", "--benchmark", str(bench), "--model",
                  "hf:/no/such/model", "--scenario", "b", "--template", "mmlu", "--splits",
                  "dev,val", "--alpha", "0.01", cwd=tmp_path)  # fmt: skip
    err = res.stderr
    assert "ignored --scenario: it applies to --method permutation; this is benbench" in err
    assert "ignored --template: it applies to --method permutation; this is benbench" in err
    assert "ignored --splits: it applies to --method cap; this is benbench" in err
    assert "ignored --alpha: it applies to --method permutation; this is benbench" in err
    assert "ignored --lenient" not in err and res.returncode == 2
