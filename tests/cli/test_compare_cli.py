"""`contamscope compare` end to end: the tiny random model against a copy trained on half of
the benchmark (real training, real permutation runs, the real command line)."""

from __future__ import annotations

import copy
import json
import random
import re
import shutil
from pathlib import Path

import pytest
from cli_runner import compare_page, run_cli

WORDS = [
    "amber",
    "basil",
    "cobalt",
    "dune",
    "ember",
    "fjord",
    "garnet",
    "harbor",
    "iris",
    "jasper",
    "kelp",
    "lotus",
    "marble",
    "nectar",
    "onyx",
    "pepper",
    "quartz",
    "raven",
    "sable",
    "thistle",
    "umber",
    "violet",
    "willow",
    "xenon",
    "yarrow",
    "zephyr",
]
N_ITEMS, N_LEAKED = 20, 16


def _rows() -> list[list[str]]:
    rng = random.Random(5)
    rows = []
    for i in range(N_ITEMS):
        options = rng.sample(WORDS, 4)
        while options == sorted(options) or options == sorted(options, reverse=True):
            rng.shuffle(options)  # no alphabetical block: every order is as natural
        rows.append([f"Item {i}: which word is meant here", *options, "ABCD"[i % 4]])
    return rows


def _permutation(model: Path, out: Path, *extra: str) -> None:
    """A permutation run of ``model`` (BOS <|endoftext|>, CPU) into ``out``; ``extra`` adds
    --benchmark and the selection."""
    res = run_cli(
        "permutation",
        "--model",
        f"hf:{model}",
        *extra,
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
    """A 20-item benchmark, the tiny model and a copy trained on the first 16 items' text in
    their published order (20 epochs): the copy's permutation run and the base model's."""
    import torch

    from contamscope.backends import load_backend
    from contamscope.data.items import MCQItem
    from contamscope.perturb import TEMPLATES
    from contamscope.validate import TrainConfig, train_epochs, training_text
    from contamscope.validate.train import save_checkpoint, tokenize_texts

    root = tmp_path_factory.mktemp("compare")
    bench = root / "toy_test.csv"
    rows = _rows()
    bench.write_text("\n".join(",".join(r) for r in rows) + "\n", encoding="utf-8")

    base = load_backend(
        f"hf:{tiny_model_path}", device="cpu", dtype="float32", options={"bos": "<|endoftext|>"}
    )
    leaked = [MCQItem(id=str(i), question=r[0], options=tuple(r[1:5])) for i, r in enumerate(rows)]
    texts = [training_text(it, TEMPLATES["paper"], (0, 1, 2, 3)) for it in leaked[:N_LEAKED]]
    torch.manual_seed(0)
    model = copy.deepcopy(base.model)  # type: ignore[attr-defined]
    seqs = tokenize_texts(base.tokenizer, texts, base.bos_id)  # type: ignore[attr-defined]
    train_epochs(model, seqs, 20, TrainConfig(lr=1e-2, batch_items=5))
    tuned = root / "tuned-model"
    save_checkpoint(model, base.tokenizer, tuned, {"epochs": 20})  # type: ignore[attr-defined]

    out = {"bench": bench, "root": root, "tiny": tiny_model_path}
    for name, path in (("base", tiny_model_path), ("tuned", tuned)):
        _permutation(path, root / name, "--benchmark", str(bench))
        out[name] = root / name
    return out


def test_compare_finds_the_trained_copy_either_way_round(setup: dict[str, Path]) -> None:
    root = setup["root"]
    res = run_cli("compare", str(setup["base"]), str(setup["tuned"]), "--out", "c.md", cwd=root)
    assert res.returncode == 0, res.stderr
    assert "20 scored in both" in res.stdout
    assert "B more drawn to the published orders" in res.stdout
    md = (root / "c.md").read_text()
    assert "| Algorithm 1: original is the max |" in md and "**B more drawn" in md

    js = run_cli("compare", str(setup["base"]), str(setup["tuned"]), "--json", cwd=root)
    result = json.loads(js.stdout)
    stats = result["statistics"]
    assert result["counts"]["paired"] == N_ITEMS and stats["direction"] == "B"
    assert stats["p_value"] <= 0.05 and stats["gap"]["difference"] > 0
    # the numbers are the runs' own: B's mean gap is the mean of its records' gaps
    recs = [json.loads(x) for x in (setup["tuned"] / "items.jsonl").read_text().splitlines()]
    assert stats["gap"]["b"] == pytest.approx(sum(r["gap"] for r in recs) / len(recs))
    assert stats["alg1"]["b_count"] == sum(r["alg1"] for r in recs)
    # the items the copy alone ranks first are mostly trained ones
    b_only = [int(i.rsplit("-", 1)[-1]) for i in result["items"]["alg1_b_only"]]
    assert sum(i < N_LEAKED for i in b_only) > len(b_only) / 2

    back = json.loads(
        run_cli("compare", str(setup["tuned"]), str(setup["base"]), "--json", cwd=root).stdout
    )
    assert back["statistics"]["direction"] == "A"
    assert back["statistics"]["p_value"] == pytest.approx(stats["p_value"])


def test_the_verdict_sets_naturally_ordered_items_aside_as_a_run_does(
    setup: dict[str, Path], tmp_path: Path
) -> None:
    """With the trained items marked as naturally ordered, the difference the verdict reads
    is on the 4 others, where no p below 0.375 is possible: it said "B more drawn ... has seen
    more" from items a run's own verdict sets aside."""
    import shutil

    runs = []
    for name in ("base", "tuned"):
        run = shutil.copytree(setup[name], tmp_path / name)
        ids = [json.loads(x)["id"] for x in (run / "items.jsonl").read_text().splitlines()]
        s = json.loads((run / "summary.json").read_text())
        s["natural_order"] = {"n_items": N_LEAKED, "ids": ids[:N_LEAKED]}
        (run / "summary.json").write_text(json.dumps(s))
        runs.append(run)
    res = run_cli("compare", *map(str, runs), "--json", cwd=tmp_path)
    result = json.loads(res.stdout)
    assert result["statistics"]["direction"] == "B"  # over all pairs, as before
    assert result["without_natural"]["n_items"] == N_ITEMS - N_LEAKED
    verdict = result["verdict"]
    assert verdict["label"] == "no difference", verdict
    assert "no p-value below 0.375 was possible" in verdict["text"]


def test_one_run_against_itself_differs_in_nothing(setup: dict[str, Path]) -> None:
    res = run_cli("compare", str(setup["base"]), str(setup["base"]), cwd=setup["root"])
    assert res.returncode == 0, res.stderr
    assert "do not differ at 5%" in res.stdout
    assert "same model set-up" in res.stderr
    # differences of rates in percentage points, as the board gives them, and p as every
    # table gives it (it read "+0.0%" and "p = 1"; QA)
    said = " ".join(res.stdout.split())
    assert re.search(r"\+0\.0 pp .* \[-[\d.]+ pp, \+[\d.]+ pp\]", said), said
    assert "(p = 1.000," in said


def test_runs_that_do_not_compare_are_refused_in_one_line(
    setup: dict[str, Path], tiny_model_path: Path
) -> None:
    root = setup["root"]
    other = root / "other.csv"
    other.write_text("Which is a colour,red,dog,cat,cup,A\n", encoding="utf-8")
    runs = {}
    for name, extra in (
        ("other-bench", ["--benchmark", str(other)]),
        (
            "other-template",
            ["--benchmark", str(setup["bench"]), "--limit", "2", "--template", "mmlu"],
        ),
    ):
        _permutation(tiny_model_path, root / name, *extra)
        runs[name] = root / name
    not_perm = root / "not-permutation"
    shutil.copytree(setup["base"], not_perm)
    settings = json.loads((not_perm / "settings.json").read_text())
    (not_perm / "settings.json").write_text(json.dumps({**settings, "method": "benbench"}))

    for args, words in (
        ((setup["base"], runs["other-bench"]), "read different benchmark files"),
        ((setup["base"], runs["other-template"]), "lay the options out differently"),
        ((setup["base"], not_perm), "is a permutation run and"),
        ((setup["base"], root / "missing"), "no such run folder"),
    ):
        res = run_cli("compare", *map(str, args), cwd=root)
        assert res.returncode == 2, res.stdout
        assert words in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert "Traceback" not in res.stderr
    res = run_cli("compare", str(setup["base"]), str(setup["tuned"]), "--out", "x.txt", cwd=root)
    assert res.returncode == 2 and "--out x.txt: write .json, .md or .html" in res.stderr
    assert not (root / "x.txt").exists()


def test_compare_page_in_a_browser(setup: dict[str, Path]) -> None:
    page = compare_page(
        setup["base"],
        setup["tuned"],
        setup["root"] / "c.html",
        search="""(() => { const i = document.querySelector('#items input');
            i.value = 'toy_test-3'; i.dispatchEvent(new Event('input'));
            return document.querySelectorAll('#items tbody tr').length; })()""",
    )
    assert page["figures"] == 2
    assert page["sections"] == ["verdict", "evidence", "items", "provenance"]
    assert page["count"] == f"{N_ITEMS} of {N_ITEMS} rows"
    assert page["verdict"] == "B more drawn to the published orders"
    assert page["search"] == 1


def test_only_the_items_both_runs_scored_under_the_same_orders_are_paired(
    setup: dict[str, Path],
) -> None:
    """A run of the first 6 items pairs 6 (14 only in A); a run whose orders were drawn (4
    options above --max-exhaustive 3) pairs none and is refused, naming why."""
    root = setup["root"]
    for name, extra in (
        ("first-six", ["--limit", "6"]),
        ("drawn-orders", ["--limit", "4", "--max-exhaustive", "3", "--mc-orders", "10"]),
    ):
        _permutation(root / "tuned-model", root / name, "--benchmark", str(setup["bench"]), *extra)
    res = run_cli("compare", str(setup["base"]), str(root / "first-six"), "--json", cwd=root)
    assert res.returncode == 0, res.stderr
    counts = json.loads(res.stdout)["counts"]
    assert counts == {
        "paired": 6,
        "only_a": N_ITEMS - 6,
        "only_b": 0,
        "other_orders": 0,
        "natural_order": 0,
    }
    six = json.loads(res.stdout)["paired_items"]
    page = root / "six.html"  # the page names what was not paired (HTML QA)
    run_cli("compare", str(setup["base"]), str(root / "first-six"), "--out", str(page), cwd=root)
    assert f"6 items scored in both (not paired: {N_ITEMS - 6} only in A)." in page.read_text(
        encoding="utf-8"
    )
    # B's six are the tuned model's, scored again in other batches: the full run's numbers to
    # float32 rounding
    full = json.loads(
        run_cli("compare", str(setup["base"]), str(setup["tuned"]), "--json", cwd=root).stdout
    )["paired_items"]
    for got, want in zip(six, full[:6], strict=False):
        assert got["id"] == want["id"] and got["alg1_b"] == want["alg1_b"]
        assert got["gap_b"] == pytest.approx(want["gap_b"], abs=1e-3)
        assert got["share_b"] == pytest.approx(want["share_b"], abs=0.05)
    res = run_cli("compare", str(setup["base"]), str(root / "drawn-orders"), cwd=root)
    assert res.returncode == 2
    assert "nothing to compare, the 4 items scored in both were scored under other" in res.stderr
    # no id in common (the same file under another name), and no records: each said (both
    # read "no item was scored in both"; QA)
    import shutil

    renamed, bare = root / "renamed", root / "bare"
    for folder in (renamed, bare):
        shutil.copytree(setup["tuned"], folder)
    items = renamed / "items.jsonl"
    items.write_text(items.read_text(encoding="utf-8").replace('"toy_test-', '"toy-'), "utf-8")
    (bare / "items.jsonl").unlink()
    for folder, needle in (
        (renamed, "no item id is in both (A's first 'toy_test-0', B's 'toy-0'; ids are made"),
        (bare, f"{bare} has no items.jsonl"),
    ):
        res = run_cli("compare", str(setup["base"]), str(folder), cwd=root)
        assert res.returncode == 2 and needle in " ".join(res.stderr.split()), res.stderr


# --------------------------------------------------------------------------- membership runs


def _membership(model: Path, out: Path, bench: Path, ref: Path, *extra: str) -> Path:
    res = run_cli(
        "membership",
        "--model",
        f"hf:{model}",
        "--benchmark",
        str(bench),
        "--reference",
        str(ref),
        *extra,
        "--out",
        str(out),
        "--device",
        "cpu",
        "-M",
        "bos=<|endoftext|>",
        cwd=out.parent,
    )
    assert res.returncode == 0, res.stderr
    return out


@pytest.fixture(scope="module")
def membership(setup: dict[str, Path]) -> dict[str, Path]:
    """Membership runs (Min-K%++) of the base model and of the copy trained on 16 of the 20
    benchmark items, against 30 reference items of random words."""
    from toy_rows import word_rows

    root = setup["root"]
    ref = root / "fresh.csv"
    ref.write_text("\n".join(word_rows(30, seed=4)) + "\n", encoding="utf-8")
    out = {"ref": ref}
    for name, model in (("base", setup["tiny"]), ("tuned", root / "tuned-model")):
        out[name] = _membership(model, root / f"m-{name}", setup["bench"], ref)
    return out


def test_compare_membership_runs_finds_the_trained_copy(
    setup: dict[str, Path], membership: dict[str, Path]
) -> None:
    root = setup["root"]
    res = run_cli("compare", str(membership["base"]), str(membership["tuned"]), cwd=root)
    assert res.returncode == 0, res.stderr
    assert "20 benchmark and 30 reference scored in both" in res.stdout
    assert "B more familiar with the benchmark" in res.stdout
    result = json.loads(
        run_cli(
            "compare", str(membership["base"]), str(membership["tuned"]), "--json", cwd=root
        ).stdout
    )
    stats = result["statistics"]
    assert result["method"] == "membership" and stats["tested"] == ["min_k_pp"]
    assert stats["direction"] == "B" and stats["min_k_pp"]["two_sided"] <= 0.05
    # each AUC is the run's own dataset-level AUC
    for who in ("a", "b"):
        run = membership["base" if who == "a" else "tuned"]
        summary = json.loads((run / "summary.json").read_text())
        assert stats["min_k_pp"][who] == pytest.approx(summary["statistics"]["dataset_test"]["auc"])
    back = json.loads(
        run_cli(
            "compare", str(membership["tuned"]), str(membership["base"]), "--json", cwd=root
        ).stdout
    )
    assert back["statistics"]["direction"] == "A"
    assert back["statistics"]["p_value"] == pytest.approx(stats["p_value"])
    same = run_cli("compare", str(membership["base"]), str(membership["base"]), cwd=root)
    assert "do not differ at 5%" in same.stdout


def test_membership_runs_that_do_not_compare_are_refused(
    setup: dict[str, Path], membership: dict[str, Path]
) -> None:
    from toy_rows import word_rows

    root = setup["root"]
    loss = root / "m-loss"
    shutil.copytree(membership["tuned"], loss)
    run_cli("reanalyse", str(loss), "--statistic", "loss", cwd=root)
    other_ref = root / "fresh-other.csv"
    other_ref.write_text("\n".join(word_rows(12, seed=9)) + "\n", encoding="utf-8")
    other = _membership(setup["tiny"], root / "m-other-ref", setup["bench"], other_ref)
    for args, words in (
        ((membership["base"], loss), f"`contamscope reanalyse {loss} --statistic min_k_pp`"),
        ((membership["base"], other), "read different reference files"),
        ((membership["base"], setup["base"]), "is a membership run and"),
    ):
        res = run_cli("compare", *map(str, args), cwd=root)
        assert res.returncode == 2, res.stdout
        assert words in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    # brought to one statistic, they compare
    run_cli("reanalyse", str(loss), "--statistic", "min_k_pp", cwd=root)
    res = run_cli("compare", str(membership["base"]), str(loss), cwd=root)
    assert res.returncode == 0 and "B more familiar with the benchmark" in res.stdout
    # records taken out: said by the file, not as "the runs share only 0 benchmark items"
    # (compare QA), and a run that lost one is compared on the rest, "1 benchmark item" (not
    # "items") only in A
    bare, empty, one_less = root / "m-bare", root / "m-empty", root / "m-one-less"
    for folder in (bare, empty, one_less):
        shutil.copytree(membership["tuned"], folder)
    (bare / "items.jsonl").unlink()
    (empty / "items.jsonl").write_text("", encoding="utf-8")
    lines = (one_less / "items.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    first_bench = next(i for i, ln in enumerate(lines) if '"role": "benchmark"' in ln)
    (one_less / "items.jsonl").write_text("".join(lines[:first_bench] + lines[first_bench + 1 :]))
    for folder, words in (
        (bare, f"nothing to compare, {bare} has no items.jsonl"),
        (empty, f"B: {empty / 'items.jsonl'} holds 0 of the 50 item records its summary.json"),
    ):
        res = run_cli("compare", str(membership["base"]), str(folder), cwd=root)
        said = " ".join(res.stderr.split())
        assert (
            res.returncode == 2 and words in said and len(res.stderr.strip().splitlines()) == 1
        ), said
    res = run_cli("compare", str(membership["base"]), str(one_less), cwd=root)
    said = " ".join(res.stdout.split())
    assert res.returncode == 0 and "not paired: 1 benchmark item only in A" in said, said
    # the level as given, not rounded to a whole percent ("do not differ at 0%"; compare QA)
    res = run_cli(
        "compare", str(membership["base"]), str(membership["base"]), "--alpha", "0.001", cwd=root
    )
    assert "do not differ at 0.1%" in " ".join(res.stdout.split()), res.stdout


def test_membership_compare_page_in_a_browser(
    setup: dict[str, Path], membership: dict[str, Path]
) -> None:
    page = compare_page(membership["base"], membership["tuned"], setup["root"] / "m.html")
    assert page["figures"] == 1
    assert page["sections"] == ["verdict", "evidence", "items", "provenance"]
    assert page["count"] == "50 of 50 rows"
    assert page["verdict"] == "B more familiar with the benchmark"
