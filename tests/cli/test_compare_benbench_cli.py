"""`contamscope compare` on two BenBench runs, end to end: the tiny random model against a copy
trained on most test items' original text (real training, real benbench runs with inline
paraphrases, the real command line)."""

from __future__ import annotations

import copy
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from cli_runner import compare_page, run_cli
from toy_rows import write_jsonl

NAMES = ["Tom", "Ann", "Raj", "Lea", "Omar", "Ines", "Kai", "Mia", "Sven", "Yuki", "Ada", "Bo"]
THINGS = ["apples", "pens", "stamps", "shells", "coins", "books", "cards", "beads"]
N_TEST, N_LEAKED, N_TRAIN = 18, 14, 6


def _rows(n: int, seed: int) -> list[dict[str, str]]:
    """GSM8K-like items with an inline paraphrase that keeps the final answer."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        who, what = rng.choice(NAMES), rng.choice(THINGS)
        a, b = rng.randint(2, 40), rng.randint(2, 40)
        rows.append(
            {
                "question": f"{who} has {a} {what} and gets {b} more {what} from a friend. "
                f"How many {what} does {who} have now?",
                "answer": f"{who} has {a} + {b} = {a + b} {what} now.\n#### {a + b}",
                "rewritten_question": f"A friend gives {who} {b} {what}; before that {who} "
                f"owned {a}. What is the count of {what} now?",
                "rewritten_answer": f"The count is {a} + {b} = {a + b}.\n#### {a + b}",
            }
        )
    return rows


def _benbench(model: Path, out: Path, *extra: str) -> None:
    res = run_cli(
        "benbench",
        "--model",
        f"hf:{model}",
        *extra,
        "--no-lenient",
        "--bootstrap",
        "200",
        "--out",
        str(out),
        "--device",
        "cpu",
        "-M",
        "bos=<|endoftext|>",
        cwd=out.parent,
    )
    assert res.returncode == 0, res.stderr


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, tiny_model_path: Path) -> dict[str, Path]:
    """The tiny model and a copy trained (20 epochs) on the original text of the first
    N_LEAKED test items; each one's BenBench run on the test and train files."""
    import torch

    from contamscope.backends import load_backend
    from contamscope.validate import TrainConfig, train_epochs
    from contamscope.validate.train import save_checkpoint, tokenize_texts

    root = tmp_path_factory.mktemp("compare-bb")
    test_rows, train_rows = _rows(N_TEST, 1), _rows(N_TRAIN, 2)
    test = write_jsonl(root / "toy-test.jsonl", test_rows)
    train = write_jsonl(root / "toy-train.jsonl", train_rows)
    base = load_backend(
        f"hf:{tiny_model_path}", device="cpu", dtype="float32", options={"bos": "<|endoftext|>"}
    )
    texts = [f"{r['question']} {r['answer']}" for r in test_rows[:N_LEAKED]]  # --ngram-text
    torch.manual_seed(0)
    model = copy.deepcopy(base.model)  # type: ignore[attr-defined]
    seqs = tokenize_texts(base.tokenizer, texts, base.bos_id)  # type: ignore[attr-defined]
    train_epochs(model, seqs, 20, TrainConfig(lr=1e-2, batch_items=7))
    tuned = root / "tuned-model"
    save_checkpoint(model, base.tokenizer, tuned, {"epochs": 20})  # type: ignore[attr-defined]

    out = {"test": test, "train": train, "root": root, "tuned_model": tuned}
    for name, path in (("base", tiny_model_path), ("tuned", tuned)):
        _benbench(path, root / name, "--benchmark", str(test), "--train", str(train))
        out[name] = root / name
    return out


def _compare(setup: dict[str, Path], a: Path, b: Path) -> dict[str, Any]:
    res = run_cli("compare", str(a), str(b), "--json", cwd=setup["root"])
    assert res.returncode == 0, res.stderr
    result: dict[str, Any] = json.loads(res.stdout)
    return result


def test_compare_finds_the_trained_copy_either_way_round(setup: dict[str, Path]) -> None:
    root = setup["root"]
    res = run_cli("compare", str(setup["base"]), str(setup["tuned"]), "-o", "c.md", cwd=root)
    assert res.returncode == 0, res.stderr
    assert f"{N_TEST + N_TRAIN} analysed in both from the same texts" in res.stdout
    assert "B more familiar with the original wording" in res.stdout
    assert "train split (6 items)" in res.stdout
    md = (root / "c.md").read_text()
    assert "| NLL gap, paraphrases - original (nats/token) | 18 |" in md

    result = _compare(setup, setup["base"], setup["tuned"])
    stats = result["statistics"]
    assert result["method"] == "benbench" and result["tested_on"] == "test"
    assert result["counts"]["by_split"] == {"test": N_TEST, "train": N_TRAIN}
    assert stats["direction"] == "B" and stats["p_value"] <= 0.05
    assert stats["tested"] == ["nll", "ngram_exact"]  # --no-lenient: no ROUGE-L / edit
    assert "ngram_rouge" not in stats["metrics"] and stats["nll"]["difference"] > 0
    # the numbers are the runs' own: B's mean NLL gap is minus the mean of its test Deltas
    recs = [json.loads(x) for x in (setup["tuned"] / "items.jsonl").read_text().splitlines()]
    deltas = [r["metrics"]["delta"]["nll"] for r in recs if r["split"] == "test"]
    assert stats["nll"]["b"] == pytest.approx(-sum(deltas) / len(deltas))
    # the items listed are the test split's, largest NLL-gap increase first (the tiny model
    # learns the items' shared wording, so untrained items' gaps grow too: no item-level claim)
    top = result["items"]["largest_gap_increase"]
    rises = sorted(
        (p["nll_b"] - p["nll_a"] for p in result["paired_items"] if p["split"] == "test"),
        reverse=True,
    )
    assert top["metric"] == "nll" and len(top["items"]) == N_TEST
    assert [t["b"] - t["a"] for t in top["items"]] == pytest.approx(rises)
    assert all(t["id"].startswith("test/") for t in top["items"])

    back = _compare(setup, setup["tuned"], setup["base"])
    assert back["statistics"]["direction"] == "A"
    assert back["statistics"]["p_value"] == pytest.approx(stats["p_value"])
    assert back["statistics"]["nll"]["difference"] == pytest.approx(-stats["nll"]["difference"])


def test_one_run_against_itself_differs_in_nothing(setup: dict[str, Path]) -> None:
    res = run_cli("compare", str(setup["base"]), str(setup["base"]), cwd=setup["root"])
    assert res.returncode == 0, res.stderr
    assert "do not differ at 5%" in res.stdout and "same model set-up" in res.stderr
    assert _compare(setup, setup["base"], setup["base"])["statistics"]["p_value"] == 1.0


def _edited_copy(src: Path, dst: Path, edit: Any) -> Path:
    shutil.copytree(src, dst)
    recs = [json.loads(x) for x in (dst / "items.jsonl").read_text().splitlines()]
    summary = json.loads((dst / "summary.json").read_text())
    edit(recs, summary)
    (dst / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (dst / "summary.json").write_text(json.dumps(summary))
    return dst


def test_items_analysed_from_other_paraphrases_are_not_paired(setup: dict[str, Path]) -> None:
    def reword(recs: list[dict[str, Any]], summary: dict[str, Any]) -> None:
        for r in recs[:3]:
            r["versions"][1]["question"] += " (reworded)"

    other = _edited_copy(setup["tuned"], setup["root"] / "other-paras", reword)
    result = _compare(setup, setup["base"], other)
    assert result["counts"]["other_paraphrases"] == 3
    assert result["counts"]["paired"] == N_TEST + N_TRAIN - 3
    page = setup["root"] / "other.html"
    res = run_cli("compare", str(setup["base"]), str(other), "--out", str(page), cwd=setup["root"])
    assert "not paired: 3 analysed from other paraphrases" in res.stdout
    said = " ".join(res.stdout.split())  # (the items line said "3 only in both"; QA)
    assert "3 in both, from other paraphrases" in said and "only in both" not in said, said
    # the page says it too (only the collapsed provenance JSON held it; HTML QA)
    assert "(not paired: 3 analysed from other paraphrases)" in page.read_text(encoding="utf-8")


def test_runs_that_do_not_compare_are_refused_in_one_line(
    setup: dict[str, Path], tiny_model_path: Path
) -> None:
    root = setup["root"]
    _benbench(tiny_model_path, root / "n4", "--benchmark", str(setup["test"]), "--n", "4")
    other = write_jsonl(root / "other-test.jsonl", _rows(4, 9))
    _benbench(tiny_model_path, root / "other-bench", "--benchmark", str(other))

    def lenient(thr: float) -> Any:
        def edit(recs: list[dict[str, Any]], summary: dict[str, Any]) -> None:
            summary["config"].update(lenient=True, edit_threshold=thr)

        return edit

    lenient_a = _edited_copy(setup["base"], root / "lenient-a", lenient(0.9))
    lenient_b = _edited_copy(setup["tuned"], root / "lenient-b", lenient(0.75))
    perm = _edited_copy(setup["base"], root / "perm", lambda r, s: s.update(method="permutation"))
    (perm / "settings.json").write_text(json.dumps({"method": "permutation"}))

    for args, words in (
        ((setup["base"], root / "n4"), "measured other things (n 5 vs 4)"),
        ((setup["base"], root / "other-bench"), "read different test files"),
        ((lenient_a, lenient_b), f"`contamscope reanalyse {lenient_b} --rouge-threshold"),
        ((setup["base"], perm), "is a benbench run and"),
    ):
        res = run_cli("compare", *map(str, args), cwd=root)
        assert res.returncode == 2, res.stdout
        assert words in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert "Traceback" not in res.stderr


def test_compare_page_in_a_browser(setup: dict[str, Path]) -> None:
    page = compare_page(
        setup["base"],
        setup["tuned"],
        setup["root"] / "c.html",
        splits='document.querySelector("#splits .tbl-count").textContent',
        search="""(() => { const i = document.querySelector('#items input');
            i.value = 'train/'; i.dispatchEvent(new Event('input'));
            return document.querySelectorAll('#items tbody tr').length; })()""",
    )
    assert page["figures"] == 2
    assert page["sections"] == ["verdict", "evidence", "splits", "items", "provenance"]
    n = N_TEST + N_TRAIN
    assert page["count"] == f"{n} of {n} rows"
    assert page["splits"] == "4 of 4 rows"  # 2 splits x 2 gaps
    assert page["verdict"] == "B more familiar with the original wording"
    assert page["search"] == N_TRAIN
