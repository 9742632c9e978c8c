"""`contamscope compare` on two CAP runs, end to end: the tiny random model against a copy
trained on the test split's prompts and answer letters (`contamscope validate --method cap`:
real training, real CAP runs on both checkpoints, the real command line)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from cli_runner import compare_page, run_cli

from contamscope.detectors.cap import pcr

N = 20
WORDS = ["lamp", "river", "stone", "cloud", "apple", "tiger", "chair", "glass", "piano", "mouse"]
WORDS += ["bread", "train", "honey", "paper", "ocean", "tulip", "violin", "zebra", "wagon"]


def _rows(n: int, seed: int) -> list[list[str]]:
    """Multiple-choice rows (question, four options, answer letter), answers drawn at random."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        opts = rng.sample(WORDS, 4)
        q = f"Which of {' '.join(rng.sample(WORDS, 3))} is {rng.choice(['red', 'old', 'big'])}"
        rows.append([q, *opts, rng.choice("ABCD")])
    return rows


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, tiny_model_path: Path) -> dict[str, Path]:
    """`validate --method cap`: CAP runs of the tiny model (epoch 0) and of its copy trained 30
    epochs on the N test items (dev untouched)."""
    root = tmp_path_factory.mktemp("compare-cap")
    bench = root / "mcq"
    for split, seed in (("dev", 1), ("test", 2)):
        (bench / split).mkdir(parents=True)
        text = "\n".join(",".join(r) for r in _rows(N, seed)) + "\n"
        (bench / split / f"toy_{split}.csv").write_text(text, encoding="utf-8")
    out = root / "val"
    res = run_cli(
        "validate", "--method", "cap", "--benchmark", str(bench), "--splits", "dev,test",
        "--train-split", "test", "--n-items", str(N), "--epochs", "30", "--lr", "1e-2",
        "--train-batch-items", "4", "--model", f"hf:{tiny_model_path}",
        "-M", "bos=<|endoftext|>", "--out", str(out), "--device", "cpu", cwd=root,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    runs = {
        r["epochs"]: out / r["run"]
        for r in json.loads((out / "summary.json").read_text())["results"]
    }
    return {"root": root, "bench": bench, "base": runs[0], "tuned": runs[30]}


def _compare(root: Path, a: Path, b: Path) -> dict[str, Any]:
    res = run_cli("compare", str(a), str(b), "--json", cwd=root)
    assert res.returncode == 0, res.stderr
    result: dict[str, Any] = json.loads(res.stdout)
    return result


def _records(run: Path) -> dict[str, dict[str, Any]]:
    recs = [json.loads(x) for x in (run / "items.jsonl").read_text().splitlines() if x.strip()]
    return {r["id"]: r for r in recs}


def _loglik_mc(rec: dict[str, Any]) -> tuple[float, float]:
    lo, lm = rec["loglik"]["original"], rec["loglik"]["modified"]
    c0, c1 = lo.index(max(lo)), lm.index(max(lm))
    same = rec["options"][c0].strip() == rec["modified_options"][c1].strip()
    return float(c0 == rec["answer"]), float(same)


def test_compare_finds_the_copy_trained_on_test_either_way_round(setup: dict[str, Path]) -> None:
    root = setup["root"]
    res = run_cli("compare", str(setup["base"]), str(setup["tuned"]), "-o", "c.md", cwd=root)
    assert res.returncode == 0, res.stderr
    assert f"{2 * N} analysed in both from the same texts (dev {N}, test {N})" in res.stdout
    assert "B leans further toward test" in res.stdout
    md = (root / "c.md").read_text()
    assert "| (M - C)_test - (M - C)_dev, log-likelihood choice | 20 + 20 |" in md
    assert "| PCR_test - PCR_dev, log-likelihood choice (not in the verdict) | 20 + 20 |" in md

    result = _compare(root, setup["base"], setup["tuned"])
    stats = result["statistics"]
    assert result["method"] == "cap" and result["reference_split"] == "dev"
    assert stats["metrics"] == ["generate/test", "loglik/test"]
    assert stats["direction"] == "B" and stats["p_value"] <= 0.05
    # the numbers are the runs' own: each reader's M, C and PCR recomputed from the stored
    # predictions (generation) and log-probs (log-likelihood choice)
    readers = {"generate": lambda r: (r["m"], r["c"]), "loglik": _loglik_mc}
    for reader, read in readers.items():
        t = stats[f"{reader}/test"]
        for who, run in (("a", setup["base"]), ("b", setup["tuned"])):
            recs = _records(run)
            for part, split in (("reference", "dev"), ("other", "test")):
                mc = [read(r) for r in recs.values() if r["split"] == split]
                m = sum(x[0] for x in mc) / len(mc)
                c = sum(x[1] for x in mc) / len(mc)
                got = t[who][part]
                assert got["m"] == pytest.approx(m) and got["c"] == pytest.approx(c)
                assert got["excess"] == pytest.approx(m - c)
                assert got["pcr"] == pytest.approx(pcr(m, c))
            for stat in ("excess", "pcr"):
                lean = t[who]["other"][stat] - t[who]["reference"][stat]
                assert t[who][f"lean_{stat}"] == pytest.approx(lean)
        for stat in ("excess", "pcr"):
            assert t[stat]["difference"] == pytest.approx(
                t["b"][f"lean_{stat}"] - t["a"][f"lean_{stat}"]
            )
        assert t["two_sided"] == t["excess"]["two_sided"]
        # the trained copy got the test answers right more often than their reordered versions
        assert t["b"]["other"]["m"] > t["b"]["other"]["c"]
    best = stats[stats["smallest"]]
    assert best["difference"] == best["excess"]["difference"] > 0 and best["ci"][0] > 0
    assert stats["p_value"] == pytest.approx(2 * best["two_sided"])

    back = _compare(root, setup["tuned"], setup["base"])
    assert back["statistics"]["direction"] == "A"
    assert back["statistics"]["p_value"] == pytest.approx(stats["p_value"], rel=0.2)
    key = stats["smallest"]
    assert back["statistics"][key]["difference"] == pytest.approx(-best["difference"])
    assert back["verdict"]["label"] == "A leans further toward test"


def test_compare_page_in_a_browser(setup: dict[str, Path]) -> None:
    found = compare_page(
        setup["base"],
        setup["tuned"],
        setup["root"] / "c.html",
        verdict="document.querySelector('#verdict .verdict').textContent",
        bars="document.querySelectorAll('#evidence svg').length",
        rows="document.querySelectorAll('#items tbody tr').length",
    )
    assert found["verdict"].startswith("B leans further toward test")
    assert found["bars"] == 1 and found["rows"] > 0


def test_compare_refuses_runs_that_do_not_compare(setup: dict[str, Path], tmp_path: Path) -> None:
    root = setup["root"]
    tuned = tmp_path / "tuned"
    shutil.copytree(setup["tuned"], tuned)
    res = run_cli("reanalyse", str(tuned), "--pcr-alpha", "0.1", cwd=root)
    assert res.returncode == 0, res.stderr
    res = run_cli("compare", str(setup["base"]), str(tuned), cwd=root)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "were analysed differently (alpha 0.01 vs 0.1)" in res.stderr
    assert f"contamscope reanalyse {tuned} --pcr-alpha 0.01" in " ".join(res.stderr.split())
    # following the hint makes them compare, with the same numbers as before
    res = run_cli("reanalyse", str(tuned), "--pcr-alpha", "0.01", cwd=root)
    assert res.returncode == 0, res.stderr
    again = _compare(root, setup["base"], tuned)
    before = _compare(root, setup["base"], setup["tuned"])
    assert again["statistics"] == before["statistics"]

    # runs that generated otherwise, or read the splits the other way round
    for change, message in (
        (("config", "max_new_tokens", 16), "generated differently (max_new_tokens 8 vs 16)"),
        (("splits", None, ["test", "dev"]), "other reference splits (dev vs test)"),
    ):
        edited = tmp_path / f"edited-{change[0]}"
        shutil.copytree(setup["tuned"], edited)
        summary = json.loads((edited / "summary.json").read_text())
        key, sub, value = change
        if sub is None:
            summary[key] = value
        else:
            summary[key][sub] = value
        (edited / "summary.json").write_text(json.dumps(summary))
        res = run_cli("compare", str(setup["base"]), str(edited), cwd=root)
        assert res.returncode == 2 and message in " ".join(res.stderr.split()), res.stderr

    # a CAP run and the validation folder around it: not two runs of one method
    res = run_cli("compare", str(setup["base"]), str(setup["base"].parent), cwd=root)
    assert (
        res.returncode == 2 and "a validate run; compare reads two permutation runs" in res.stderr
    )
    assert "two membership or two cap runs" in res.stderr

    # items whose modified inputs differ (another seed's option orders) do not pair
    other = tmp_path / "other-seed"
    shutil.copytree(setup["tuned"], other)
    recs = list(_records(other).values())
    for r in recs:
        r["modified_input"] += " "
    (other / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    res = run_cli("compare", str(setup["base"]), str(other), cwd=root)
    assert res.returncode == 2
    assert "40 of the 40 items analysed in both were analysed from other modified inputs" in (
        " ".join(res.stderr.split())
    )
