"""`contamscope validate` with the membership detectors (reference items) on the tiny model."""

from __future__ import annotations

import json
import random
from pathlib import Path

from cli_runner import run_cli


def _bench(tmp_path: Path, n: int) -> Path:
    """Items of seeded pseudo-words: training on some teaches little about the others."""
    rng = random.Random(7)

    def word() -> str:
        return "".join(rng.choice("bcdfghjklmnprstvwz") + rng.choice("aeiou") for _ in range(3))

    rows = []
    for _ in range(n):
        question = " ".join(word() for _ in range(6))
        options = [f"{word()} {word()}" for _ in range(4)]
        rows.append(f"{question}?,{','.join(options)},A")
    path = tmp_path / "words_test.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_membership_detectors_are_calibrated_on_reference_items(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    out = tmp_path / "val"
    common = ["-M", "bos=<|endoftext|>", "--device", "cpu", "--lr", "3e-3", "--out", str(out)]
    res = run_cli(
        "validate",
        "--model",
        f"hf:{tiny_model_path}",
        "--benchmark",
        str(_bench(tmp_path, 40)),
        "--n-items",
        "8",
        "--reference-items",
        "20",
        "--epochs",
        "2",
        *common,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    summary = json.loads((out / "summary.json").read_text())
    split = json.loads((out / "split.json").read_text())
    evaluated = {x["id"] for x in split["leaked"]} | set(split["clean"])
    assert len(split["reference"]) == 20 and not evaluated & set(split["reference"])
    assert summary["split"]["n_reference"] == 20
    for res_e in summary["results"]:
        dets = res_e["detectors"]
        for stat in ("min_k_pp", "min_k", "loss", "zlib"):
            m = dets[f"membership-{stat}@0.05"]
            assert m["n"] == 8 and m["tp"] + m["fn"] == 4
            roc = res_e["roc"][f"membership-{stat}@0.05"]
            assert roc[0] == [0.0, 0.0] and roc[-1] == [1.0, 1.0]
        for name in ("combined@0.05", "gap-ref@0.05"):
            m = dets[name]
            assert m["n"] == 8 and m["tp"] + m["fn"] == 4
            assert res_e["roc"][name][-1] == [1.0, 1.0]
        comb = res_e["dataset"]["combined"]
        assert comb["n_benchmark"] == 8 and comb["n_reference"] == 20
        assert 0 <= comb["p_value"] <= 1 and "pooled ranks" in comb["statistic"]
        mem = res_e["dataset"]["membership"]
        assert mem["statistic"] == "min_k_pp" and mem["n_reference"] == 20
        assert mem["n_benchmark"] == 8 and 0 <= mem["p_value"] <= 1

    # the reference items were scored under every order too (their gaps calibrate gap-ref)
    ref_perm = (out / "epoch-2" / "reference" / "items.jsonl").read_text().splitlines()
    assert len(ref_perm) == 20 and all(len(json.loads(x)["logprobs"]) == 24 for x in ref_perm)

    # and their token statistics next to the evaluated ones
    def losses(epoch: int) -> dict[str, float]:
        path = out / f"epoch-{epoch}" / "membership" / "items.jsonl"
        recs = [json.loads(x) for x in path.read_text().splitlines()]
        assert sum(r["role"] == "reference" for r in recs) == 20
        return {r["item_id"]: r["statistics"]["loss"] for r in recs if r["role"] == "benchmark"}

    # training made the leaked items' text more familiar, and more so than the clean ones'
    before, after = losses(0), losses(2)
    gain = {k: after[k] - before[k] for k in before}
    leaked = [gain[x["id"]] for x in split["leaked"]]
    clean = [gain[i] for i in split["clean"]]
    assert min(leaked) > max(clean) and min(leaked) > 0
    assert "membership (min_k_pp) evaluated vs reference items" in res.stdout


def test_too_many_reference_items_is_one_line(tmp_path: Path, tiny_model_path: Path) -> None:
    res = run_cli(
        "validate",
        "--model",
        f"hf:{tiny_model_path}",
        "--benchmark",
        str(_bench(tmp_path, 12)),
        "--n-items",
        "8",
        "--reference-items",
        "20",  # enough to reach alpha 0.05 (fewer are refused first, for that reason)
        "--out",
        str(tmp_path / "v"),
        cwd=tmp_path,
    )
    assert res.returncode != 0
    assert "--reference-items 20: only 4 items are left outside the evaluated ones" in res.stderr
    assert "Traceback" not in res.stderr
