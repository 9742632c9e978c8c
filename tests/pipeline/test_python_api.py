"""The pipelines called from Python (a notebook), not through the commands: the same checks, the
same outputs, and nothing that only the command line used to guarantee."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from contamscope.backends import load_backend
from contamscope.data import MCQItem, QAItem, load_benchmark, load_cap, load_qa
from contamscope.errors import ConfigError, DataError, StoreError
from contamscope.perturb.paraphrase import Paraphrase
from contamscope.pipeline import (
    BenBenchConfig,
    CapConfig,
    MembershipConfig,
    PermutationConfig,
    PermutationOutcome,
    ReferenceSet,
    SplitInput,
    reanalyse_permutation,
    run_benbench,
    run_cap,
    run_membership,
    run_permutation,
    select_items,
)
from contamscope.store import CachedScorer, ScoreCache

ROWS = (
    "What is 2+2?,3,4,5,6,B\nWhich planet is largest?,Mars,Venus,Jupiter,Earth,C\n"
    "Pick the colour of the sky,blue,green,red,yellow,A\n"
)


@pytest.fixture()
def loaded(tmp_path: Path) -> Any:
    bench = tmp_path / "toy_test.csv"
    bench.write_text(ROWS, encoding="utf-8")
    return load_benchmark(str(bench))


def test_one_scorer_two_runs_each_count_their_own_work_and_the_verdict_is_stored(
    tmp_path: Path, loaded: Any, tiny_backend: Any
) -> None:
    """A scorer reused across runs wrote its lifetime counts into each run's summary (the second
    run said 72 computed, 72 from the cache, for 72 requests all from the cache)."""
    scorer = CachedScorer(tiny_backend, ScoreCache(tmp_path / "c.sqlite"))
    first = run_permutation(loaded, loaded.items, scorer, str(tmp_path / "a"), PermutationConfig())
    second = run_permutation(loaded, loaded.items, scorer, tmp_path / "b", PermutationConfig())
    t1, t2 = first.summary["timings"], second.summary["timings"]
    assert (t1["scores_computed"], t1["scores_from_cache"]) == (72, 0)
    assert (t2["scores_computed"], t2["scores_from_cache"]) == (0, 72)
    # the dataset verdict is part of the summary (it was only in the terminal and the report)
    v = json.loads((tmp_path / "a" / "summary.json").read_text())["verdict"]
    assert v == first.verdict and v["label"] in ("leakage signal", "no evidence")
    assert v["signal"] is (v["label"] == "leakage signal") and v["alpha"] == 0.05
    # the outcome: per-item records, JSON-serialisable
    assert [r["id"] for r in first.records()] == [it.id for it in loaded.items]
    assert json.loads(json.dumps(first.to_dict()))["run_dir"] == str(tmp_path / "a")
    # summary is summary.json's contents: {"4": 3}, not {4: 3} as counts.options_histogram was
    assert first.summary == json.loads((tmp_path / "a" / "summary.json").read_text("utf-8"))
    assert first.summary["counts"]["options_histogram"] == {"4": 3}
    # the folder is free once the run returned: the same cell runs again, resuming everything
    again = run_permutation(loaded, loaded.items, scorer, tmp_path / "a", PermutationConfig())
    assert again.resumed == 3 and again.scored_now == 0
    assert first.scored_now == 3 and isinstance(first, PermutationOutcome)


def test_a_cache_shared_by_threads(tmp_path: Path, loaded: Any, tiny_backend: Any) -> None:
    """A run in a worker thread failed on the cache opened in the main thread, and the error
    said to delete the (healthy) cache."""
    cache = ScoreCache(tmp_path / "c.sqlite")

    def work(name: str) -> int:
        scorer = CachedScorer(tiny_backend, cache)
        out = run_permutation(loaded, loaded.items, scorer, tmp_path / name, PermutationConfig())
        return int(out.summary["counts"]["items_analysed"])

    with ThreadPoolExecutor(2) as pool:
        assert list(pool.map(work, ["t1", "t2"])) == [3, 3]
    assert cache.info().entries == 72


def test_inputs_the_commands_never_give_are_refused_in_one_line(
    tmp_path: Path, loaded: Any, tiny_backend: Any
) -> None:
    scorer = CachedScorer(tiny_backend, None)
    cfg = PermutationConfig()
    with pytest.raises(ConfigError, match=r"items: id '.*' is given 2 times; each item must"):
        run_permutation(loaded, [loaded.items[0]] * 2, scorer, tmp_path / "d", cfg)
    qa = QAItem("q1", "What is 2+2?", "4")
    with pytest.raises(ConfigError, match=r"'q1' is a QAItem; the permutation test reads MCQItem"):
        run_permutation(loaded, [qa], scorer, tmp_path / "k", cfg)
    with pytest.raises(ConfigError, match="run_dir: expected a RunDir or a folder path, not int"):
        run_permutation(loaded, loaded.items, scorer, 3, cfg)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="--ties 'yes'"):
        PermutationConfig(ties="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="--deltas -0.2: expected a sequence"):
        PermutationConfig(deltas=-0.2)  # type: ignore[arg-type]
    # --mc-orders 100000000 on 10-option items ran on for minutes at 1 GB (no upper bound)
    with pytest.raises(ConfigError, match="--mc-orders 100000000: must be between 1 and 40,319"):
        PermutationConfig(mc_orders=100_000_000)
    assert PermutationConfig(mc_orders=40_319).mc_orders == 40_319
    assert PermutationConfig(template="mmlu").template.name == "mmlu"  # type: ignore[arg-type]
    for bad in (-1, 0):  # 0 chose nothing, where the command refuses it (QA)
        with pytest.raises(ConfigError, match=f"--limit {bad}: expected 1 or more"):
            select_items(loaded.items, limit=bad)
    # a misspelt keyword: Python's TypeError, naming the function as Python does (QA: unnamed)
    with pytest.raises(TypeError, match=r"^run_permutation\(\) got an unexpected keyword .*'sel"):
        run_permutation(loaded, [], scorer, tmp_path / "d", cfg, seleciton=None)  # type: ignore[call-arg]
    assert not (tmp_path / "d" / "items.jsonl").exists()
    # arguments of the wrong class or type failed deep inside with AttributeError, TypeError or
    # ValueError: the backend itself as the scorer, a dict as the config, "6" as a sample (QA)
    import numpy as np

    from contamscope.pipeline import BenBenchConfig, CapConfig

    wrong: list[tuple[Any, str]] = [
        (lambda: run_permutation(loaded, loaded.items, tiny_backend, tmp_path / "w", cfg),
         "scorer: expected a CachedScorer, not HFBackend; wrap the backend: CachedScorer("),
        (lambda: run_permutation(loaded, loaded.items, None, tmp_path / "w", cfg),
         "scorer: expected a CachedScorer, not NoneType"),
        (lambda: run_permutation(loaded, loaded.items, scorer, tmp_path / "w", {"alpha": 0.1}),
         "config: expected a PermutationConfig, not dict"),
        (lambda: run_permutation(None, loaded.items, scorer, tmp_path / "w", cfg),
         "loaded: expected a LoadResult, not NoneType"),
        (lambda: PermutationConfig(template=123), "--template (template): expected a Prompt"),
        (lambda: PermutationConfig(deltas="-0.2"), "--deltas '-0.2': expected a sequence of num"),
        (lambda: PermutationConfig(alpha="0.05"), "--alpha '0.05': expected a float, not str"),
        (lambda: BenBenchConfig(n_boot="100"), "--bootstrap (n_boot) '100': expected an int"),
        (lambda: CapConfig(alpha="x"), "--pcr-alpha (alpha) 'x': expected a float, not str"),
        (lambda: select_items(loaded.items, sample="6"), "--sample '6': expected a whole number"),
        (lambda: select_items(loaded.items, limit=2.5), "--limit 2.5: expected a whole number"),
        # both: the command refuses them together, the function cut the sample (QA)
        (lambda: select_items(loaded.items, limit=3, sample=5), "--limit 3 and --sample 5: give"),
        (lambda: SplitInput.build("test", [1]), "SplitInput.build('test', loaded): expected a L"),
    ]  # fmt: skip
    _refused(wrong)
    assert not (tmp_path / "w").exists()
    # numbers of numpy's kinds are numbers
    numpy_cfg = PermutationConfig(seed=np.int64(3), alpha=np.float32(0.1))
    assert type(numpy_cfg.seed) is int and type(numpy_cfg.alpha) is float  # JSON can write them
    out = run_permutation(loaded, loaded.items, scorer, tmp_path / "np", numpy_cfg)
    assert out.summary["config"]["seed"] == 3  # it failed writing settings.json (review)
    from contamscope.pipeline.membership import MembershipConfig

    assert MembershipConfig(fdr=0).fdr is False  # 0/1 for a flag, as before the type checks
    assert len(select_items(loaded.items, sample=np.int64(2))) == 2
    # an answer that is not an option's index was scored (its accuracy against nothing; QA)
    for bad_item, message in [
        (lambda: MCQItem("q", "2+2?", ("4", "3"), answer=2), "item q: answer 2 is not an opti"),
        (lambda: MCQItem("q", "2+2?", ("4", "3"), answer=True), "item q: answer True is not an"),
        (lambda: MCQItem("q", "2+2?", "43"), "item q: options must be a sequence of strings"),
    ]:
        with pytest.raises(DataError, match=re.escape(message)):
            bad_item()
    listed = MCQItem("q", "2+2?", ["4", "3"], answer=np.int64(0))  # type: ignore[arg-type]
    assert listed.options == ("4", "3") and type(listed.answer) is int and hash(listed)
    # BenBench reads question-answer items: multiple-choice ones scored the text " " silently
    split = SplitInput("test", loaded, list(loaded.items))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"split test: .* is a MCQItem; BenBench"):
        run_benbench([split], scorer, tmp_path / "bb", BenBenchConfig())


def test_membership_refuses_references_that_are_tested_items(
    tmp_path: Path, loaded: Any, tiny_backend: Any
) -> None:
    """The command refused them; from Python the test calibrated on the benchmark itself."""
    with pytest.raises(ConfigError, match=r"3 of the 3 reference items are tested items too"):
        run_membership(
            loaded,
            loaded.items,
            loaded,
            loaded.items,
            CachedScorer(tiny_backend, None),
            tmp_path / "m",
            MembershipConfig(n_boot=100),
        )
    assert not (tmp_path / "m" / "items.jsonl").exists()
    # a reference given twice would count twice as an unseen item
    with pytest.raises(ConfigError, match=r"1 of the 3 reference items repeats an earlier one"):
        run_membership(
            loaded,
            loaded.items[:1],
            loaded,
            [loaded.items[1], loaded.items[2], replace(loaded.items[1], id="copy")],
            CachedScorer(tiny_backend, None),
            tmp_path / "m",
            MembershipConfig(n_boot=100),
        )
    # no benchmark item at all is said as such, not as "all excluded" (QA)
    with pytest.raises(ConfigError, match=r"^--benchmark: no benchmark item given \(an empty"):
        run_membership(
            loaded,
            [],
            loaded,
            loaded.items[:2],
            CachedScorer(tiny_backend, None),
            tmp_path / "empty",
            MembershipConfig(n_boot=100),
        )


def test_cap_config_and_splits_are_checked_against_the_data(
    tmp_path: Path, tiny_backend: Any
) -> None:
    """CapConfig() (task mcq) on QA data died in an AttributeError deep in the run."""
    rows = [
        {"input": f"What is {a} plus {b}?", "output": str(a + b), "split": s}
        for s, pairs in (("train", [(1, 2), (3, 4)]), ("test", [(5, 6), (7, 8)]))
        for a, b in pairs
    ] + [{"input": "What is 9 plus 9?", "split": "blind"}]
    path = tmp_path / "cap.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    data = load_cap(str(path), ["train", "test", "blind"])
    # one line, as a LoadResult prints (FinEval's two splits printed 1.3 MB of items)
    assert repr(data) == (
        f"CapData(source={str(path)!r}, format='generic', task='qa', "
        f"splits=(train=2, test=2, blind=1), problems=0, content_hash={data.content_hash[:12]!r})"
    )
    assert repr(data.splits["blind"]) == "CapSplit(name='blind', items=1, modified=none)"
    scorer = CachedScorer(tiny_backend, None)
    sel = {s: data.splits[s].items for s in ("train", "test")}
    with pytest.raises(ConfigError, match=r"--task 'mcq', but .* is read as a 'qa' task"):
        run_cap(data, sel, scorer, tmp_path / "c", CapConfig())
    cfg = CapConfig(task="qa", n_boot=200)
    # a list where the splits' dict belongs named a whole item as a split
    with pytest.raises(ConfigError, match=r"selected: a list; give a dict of split name -> items"):
        run_cap(data, sel["train"], scorer, tmp_path / "c", cfg)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="at least two splits"):
        run_cap(data, {"train": sel["train"]}, scorer, tmp_path / "c", cfg)
    # the splits' items swapped: each recorded as of the other split, and the verdict, which
    # names a split, came out reversed (library QA)
    swapped = {"train": sel["test"], "test": sel["train"]}
    with pytest.raises(ConfigError, match=r"selected\['train'\]: '.*' is an item of split 'test'"):
        run_cap(data, swapped, scorer, tmp_path / "c", cfg)
    stray = replace(sel["test"][0], question="a question of no split")
    with pytest.raises(ConfigError, match=r"is not an item of split 'test' of the loaded"):
        run_cap(data, {**sel, "test": [stray]}, scorer, tmp_path / "c", cfg)
    assert not (tmp_path / "c").exists()
    with pytest.raises(ConfigError, match=r"has no split 'dev' \(it has train, test, blind\)"):
        run_cap(data, {**sel, "dev": []}, scorer, tmp_path / "c", cfg)
    with pytest.raises(ConfigError, match="split 'blind' has no reference answers"):
        run_cap(
            data,
            {"train": sel["train"], "blind": data.splits["blind"].items},
            scorer,
            tmp_path / "c",
            cfg,
        )
    assert not (tmp_path / "c" / "items.jsonl").exists()
    out = run_cap(data, sel, scorer, tmp_path / "c", cfg)
    assert out.verdict is not None and out.summary["verdict"] == out.verdict


def test_benbench_split_build_uses_a_rewritten_files_own_paraphrases(tmp_path: Path) -> None:
    """A BenBench rewritten file as the benchmark, with no reference given: the command pairs the
    paraphrases the file carries; SplitInput.build does the same (a bare SplitInput had none,
    and the run reported a Delta over 0 items)."""
    row = {
        "question": "Tom has 3 apples and buys 4 more apples at the shop.",
        "answer": "He has 3 + 4 = 7 apples in total now.\n#### 7",
        "rewritten_question": "At the shop Tom buys 4 apples; he already had 3.",
        "rewritten_answer": "In total 3 + 4 = 7 apples.\n#### 7",
    }
    path = tmp_path / "GSM8K_rewritten-test-1.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    test = load_qa(str(path))
    split = SplitInput.build("test", test)
    assert [r.name for r in split.references] == ["inline"]
    assert len(split.references[0].pairs) == 1 and split.items == test.items


def test_a_folder_given_other_items_is_refused_not_mixed(
    tmp_path: Path, loaded: Any, tiny_backend: Any
) -> None:
    """A notebook cell re-run with another sample into the same folder resumed it: the summary
    counted the new items while items.jsonl and records() kept the old ones beside them (helper
    audit: 6 items summarised, 12 records). The commands record --limit/--sample/--seed; a
    Python call now records the item ids, so other items are a run with other settings."""
    from contamscope.errors import StoreError

    scorer = CachedScorer(tiny_backend, None)
    cfg = PermutationConfig()
    run_permutation(loaded, loaded.items[:2], scorer, tmp_path / "p", cfg)
    with pytest.raises(StoreError, match=r"other settings .*selection\.item_ids_sha256"):
        run_permutation(loaded, loaded.items[1:], scorer, tmp_path / "p", cfg)
    # the same items in another order: said, not left to two hashes (QA sweep)
    with pytest.raises(StoreError, match=r"\): the items differ, other items or the same ones in"):
        run_permutation(loaded, loaded.items[1::-1], scorer, tmp_path / "p", cfg)
    again = run_permutation(loaded, loaded.items[:2], scorer, tmp_path / "p", cfg)
    assert again.resumed == 2 and len(again.records()) == 2
    other = run_permutation(loaded, loaded.items[1:], scorer, tmp_path / "p", cfg, overwrite=True)
    assert [r["id"] for r in other.records()] == [it.id for it in loaded.items[1:]]
    # with a selection of one's own (as the commands give theirs), other items were resumed
    # beside the first ones: 6 records, a summary of 3 (QA)
    sel = {"limit": 2}
    run_permutation(loaded, loaded.items[:2], scorer, tmp_path / "s", cfg, selection=sel)
    with pytest.raises(StoreError, match=r"other settings .*selection\.item_ids_sha256"):
        run_permutation(loaded, loaded.items[1:], scorer, tmp_path / "s", cfg, selection=sel)
    # a folder written before the digest was kept beside a given selection resumes
    settings = json.loads((tmp_path / "s" / "settings.json").read_text(encoding="utf-8"))
    del settings["selection"]["item_ids_sha256"]
    (tmp_path / "s" / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    again = run_permutation(loaded, loaded.items[:2], scorer, tmp_path / "s", cfg, selection=sel)
    assert again.resumed == 2 and again.scored_now == 0
    settings = json.loads((tmp_path / "s" / "settings.json").read_text(encoding="utf-8"))
    assert settings["selection"]["item_ids_sha256"] and settings["selection"]["limit"] == 2
    # and so with another analysis-only setting, which re-derives the records (review)
    del settings["selection"]["item_ids_sha256"]
    (tmp_path / "s" / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    other_deltas = PermutationConfig(deltas=(-0.1,))
    again = run_permutation(
        loaded, loaded.items[:2], scorer, tmp_path / "s", other_deltas, selection=sel
    )
    assert again.resumed == 2 and again.scored_now == 0

    rows = [{"question": f"What is {a} plus 1?", "answer": f"#### {a + 1}"} for a in range(3)]
    qa_path = tmp_path / "toy_test.jsonl"
    qa_path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    qa = load_qa(str(qa_path))
    bb = BenBenchConfig(n_boot=100)
    run_benbench([SplitInput.build("test", qa, items=qa.items[:2])], scorer, tmp_path / "b", bb)
    with pytest.raises(StoreError, match=r"selection\.item_ids_sha256"):
        run_benbench([SplitInput.build("test", qa, items=qa.items[1:])], scorer, tmp_path / "b", bb)


def test_objects_print_in_one_line_and_benbench_refuses_a_split_given_twice(
    tmp_path: Path, loaded: Any, tiny_backend: Any
) -> None:
    """A loaded MMLU printed 9 MB in a notebook, an outcome its whole summary, and backends,
    caches and run folders '<... object at 0x...>'; run_benbench took one split twice and
    counted its items twice (helper audit)."""
    from contamscope.store import RunDir

    assert repr(loaded).startswith("LoadResult(source=") and "items=3, problems=0" in repr(loaded)
    cache = ScoreCache(tmp_path / "c.sqlite")
    scorer = CachedScorer(tiny_backend, cache)
    assert repr(cache) == f"ScoreCache({str(tmp_path / 'c.sqlite')!r})"
    assert repr(tiny_backend).startswith("HFBackend(spec='hf:") and "device='cpu'" in repr(
        tiny_backend
    )
    # the BOS token shown: with and without -M bos the two printed alike (typed-API QA)
    assert repr(tiny_backend).endswith(", bos='<|endoftext|>')"), repr(tiny_backend)
    assert repr(scorer).startswith("CachedScorer(HFBackend(") and "computed=0" in repr(scorer)
    out = run_permutation(loaded, loaded.items[:1], scorer, tmp_path / "p", PermutationConfig())
    assert repr(out) == (
        f"PermutationOutcome(run_dir={str(tmp_path / 'p')!r}, scored_now=1, resumed=0, "
        f"verdict={out.verdict['label']!r})"
    )
    assert repr(RunDir(tmp_path / "p")) == f"RunDir({str(tmp_path / 'p')!r})"

    rows = [{"question": f"What is {a} plus 1?", "answer": f"#### {a + 1}"} for a in range(2)]
    qa_path = tmp_path / "toy_test.jsonl"
    qa_path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    split = SplitInput.build("test", load_qa(str(qa_path)))
    assert repr(split) == (  # it printed every item and every paraphrase (QA sweep)
        f"SplitInput(name='test', source={str(qa_path)!r}, items=2, references=[])"
    )
    ref = ReferenceSet("para", "p.jsonl", None, "id", {"x": Paraphrase("q", "a", True, "")})
    assert repr(ref) == (
        "ReferenceSet(name='para', source='p.jsonl', pairing='id', pairs=1, "
        "unmatched_rows=0, skipped_rows=0)"
    )
    with pytest.raises(ConfigError, match="split 'test' is given 2 times"):
        run_benbench([split, split], scorer, tmp_path / "b", BenBenchConfig())
    with pytest.raises(ConfigError, match="give at least one split"):
        run_benbench([], scorer, tmp_path / "b", BenBenchConfig())


def test_read_records_takes_the_run_folder_and_capfields_is_exported(
    tmp_path: Path, loaded: Any, tiny_backend: Any
) -> None:
    """read_records(run folder) raised IsADirectoryError; CapFields, named in docs/python.md,
    was only in contamscope.data.cap (helper audit)."""
    from contamscope.data import CapFields  # noqa: F401
    from contamscope.store import read_records

    out = run_permutation(
        loaded, loaded.items[:2], CachedScorer(tiny_backend, None), tmp_path / "r",
        PermutationConfig(),
    )  # fmt: skip
    assert read_records(tmp_path / "r") == read_records(str(tmp_path / "r" / "items.jsonl"))
    assert [r["id"] for r in read_records(tmp_path / "r")] == [r["id"] for r in out.records()]


def test_membership_records_say_why_a_text_has_no_statistics() -> None:
    """A -inf token log-prob gave every statistic None with no reason (the item vanished from
    the test uncounted), and any NaN read as 'longer than the context' (helper audit)."""
    import math

    from contamscope.backends.base import ScoreRequest, TokenStats
    from contamscope.data import MCQItem
    from contamscope.pipeline.membership import _record

    item = MCQItem("q", "2+2?", ("3", "4"), answer=1)
    req = ScoreRequest("", "2+2?\nA:3\nB:4\n")
    ok = _record("benchmark", item, req, TokenStats((5, 6), (-1.0, -2.0), (5, 6)), 0.2)
    assert ok["excluded"] is None and ok["statistics"] is not None
    long = _record("benchmark", item, req, TokenStats.too_long(), 0.2)
    assert long["excluded"] == "longer than the model's context window"
    # tokenised, then found too long (the transformers backend): was "a non-finite token
    # log-prob (nan; a numerical overflow?)" (library QA)
    nan2 = (math.nan, math.nan)
    over = TokenStats((5, 6), nan2, (-1, -1), 0, nan2, nan2, over_context=True)
    assert _record("benchmark", item, req, over, 0.2)["excluded"] == long["excluded"]
    for bad in (-math.inf, math.nan):
        rec = _record("benchmark", item, req, TokenStats((5, 6), (-1.0, bad), (5, 6)), 0.2)
        assert (
            rec["excluded"].startswith("a non-finite token log-prob") and rec["statistics"] is None
        )


def test_items_of_any_iterable_and_the_wrong_containers(
    tmp_path: Path, loaded: Any, tiny_backend: Any
) -> None:
    """Items given as a generator failed (no len()) after the folder had recorded 0 items, so
    the corrected call was refused; a LoadResult, one item, a selection string, items of
    another benchmark, and the wrong containers for BenBench's splits and CAP's selection
    failed with raw TypeErrors or ran with the wrong provenance (QA)."""
    scorer = CachedScorer(tiny_backend, None)
    cfg = PermutationConfig()
    out = run_permutation(loaded, (it for it in loaded.items), scorer, tmp_path / "gen", cfg)
    settings = json.loads((tmp_path / "gen" / "settings.json").read_text())
    assert out.scored_now == 3 and settings["selection"]["n_items"] == 3
    again = run_permutation(loaded, loaded.items, scorer, tmp_path / "gen", cfg)
    assert again.resumed == 3
    other = load_benchmark(
        str(_write(tmp_path / "virology_test.csv", "Is a virus alive?,yes,no,maybe,never,C\n"))
    )
    wrong: list[tuple[Any, str]] = [
        (lambda: run_permutation(loaded, loaded, scorer, tmp_path / "w", cfg),
         "items: a loaded benchmark ("),
        (lambda: run_permutation(loaded, loaded.items[0], scorer, tmp_path / "w", cfg),
         "items: a single MCQItem; give a list of items"),
        (lambda: run_permutation(loaded, 3, scorer, tmp_path / "w", cfg),
         "items: a int, not a list of items"),
        (lambda: run_permutation(loaded, other.items, scorer, tmp_path / "w", cfg),
         "items: 'virology_test-0' is not an item of the loaded benchmark ("),
        (lambda: run_permutation(loaded, loaded.items, scorer, tmp_path / "w", cfg,
                                 selection="limit 1"),  # type: ignore[arg-type]
         "selection='limit 1': a str; give a dict of how the items were chosen"),
        (lambda: run_benbench(load_qa(str(_write(tmp_path / "qa.jsonl", '{"question": "2+2?", "answer": "4"}\n'))), scorer, tmp_path / "w", BenBenchConfig()),  # type: ignore[arg-type]
         "splits: a LoadResult; give a list of SplitInput"),
    ]  # fmt: skip
    _refused(wrong)
    assert not (tmp_path / "w").exists()


def _refused(calls: list[tuple[Any, str]]) -> None:
    """Each call raises a ConfigError whose message holds its text."""
    for call, message in calls:
        with pytest.raises(ConfigError) as err:
            call()
        assert message in str(err.value)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_an_outcome_reads_its_own_records_or_says_they_are_gone(
    tmp_path: Path, loaded: Any, tiny_backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An outcome read its folder when asked: after the folder was run again with other items,
    the old outcome returned the new run's records; after a chdir, a relative folder gave []."""
    scorer = CachedScorer(tiny_backend, None)
    monkeypatch.chdir(tmp_path)
    first = run_permutation(loaded, loaded.items[:2], scorer, "run", PermutationConfig())
    monkeypatch.chdir("/")
    assert [r["id"] for r in first.records()] == [it.id for it in loaded.items[:2]]
    monkeypatch.chdir(tmp_path)
    # the same run resumed (nothing scored: a new summary, the same records) still reads
    # them (it said "written again after this outcome"; typed-API QA)
    again = run_permutation(loaded, loaded.items[:2], scorer, "run", PermutationConfig())
    assert again.resumed == 2 and again.summary["created"] >= first.summary["created"]
    assert first.records() == again.records() and len(first.records()) == 2
    # another model's run with the same counts and statistics (answers all as wrong): its
    # records were returned as this outcome's (diff-review QA)
    path = tmp_path / "run" / "summary.json"
    kept = path.read_text(encoding="utf-8")
    other = json.loads(kept)
    other["model"] = dict(other["model"], spec="hf:other", fingerprint="other")
    path.write_text(json.dumps(other), encoding="utf-8")
    with pytest.raises(StoreError, match="the folder was written again after this outcome"):
        first.records()
    path.write_text(kept, encoding="utf-8")
    # re-analysed with other thresholds: its records are not this outcome's
    reanalyse_permutation(loaded, "run", ties="leaked")
    with pytest.raises(StoreError, match="the folder was written again after this outcome"):
        first.records()
    second = run_permutation(
        loaded, loaded.items, scorer, "run", PermutationConfig(), overwrite=True
    )
    with pytest.raises(StoreError, match="the folder was written again after this outcome"):
        first.records()
    assert len(second.records()) == 3
    (tmp_path / "run" / "items.jsonl").unlink()
    with pytest.raises(StoreError, match="this run's records are no longer there"):
        second.records()


def test_a_folder_the_command_began_resumes_from_python(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    """The same items (ids in order), model and config: a folder `contamscope permutation
    --sample 3` began was refused from Python ("other settings (selection.limit ...)"); the
    summaries of BenBench and CAP also counted n_items per split from the command, in one
    number from Python (library QA)."""
    from cli_runner import run_cli

    from contamscope.backends import load_backend
    from contamscope.pipeline import select_items

    bench = tmp_path / "toy_test.csv"
    rows = ["What is 2+2?,3,4,5,6,B", "Sky colour?,blue,green,red,pink,A"]
    bench.write_text("\n".join(rows + ["Largest planet?,Mars,Venus,Jupiter,Earth,C"]) + "\n")
    out = tmp_path / "r"
    args = ["--model", f"hf:{tiny_model_path}", "--benchmark", str(bench), "--sample", "2"]
    res = run_cli("permutation", *args, "--out", str(out), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    loaded = load_benchmark(str(bench))
    backend = load_backend(f"hf:{tiny_model_path}")
    chosen = select_items(loaded.items, sample=2, seed=0)
    outcome = run_permutation(loaded, chosen, CachedScorer(backend, None), out, PermutationConfig())
    assert outcome.resumed == 2
    # other items are still refused
    with pytest.raises(StoreError, match="holds a run with other settings"):
        run_permutation(
            loaded, loaded.items[:2], CachedScorer(backend, None), out, PermutationConfig()
        )


def test_a_backend_that_breaks_its_contract_is_one_error(tmp_path: Path) -> None:
    """One result too few was a KeyError deep in the cache, None a TypeError, a positive
    log-prob was analysed, a one-option item a ValueError (library QA)."""
    from contamscope.backends.base import Backend, Capabilities, ScoreResult
    from contamscope.data import MCQItem
    from contamscope.errors import ModelError

    class Broken(Backend):
        spec = "broken"
        capabilities = Capabilities(prompt_logprobs=True)

        def __init__(self, reply: Any) -> None:
            self.reply = reply

        def fingerprint(self) -> str:
            return "broken-v1"

        def score(self, requests, progress=None):  # type: ignore[no-untyped-def]
            return self.reply(requests)

    bench = tmp_path / "t_test.csv"
    bench.write_text("What is 2+2?,3,4,5,6,B\n", encoding="utf-8")
    loaded = load_benchmark(str(bench))
    cases = [
        (lambda rs: [ScoreResult(-1.0, 1)] * (len(rs) - 1), "returned 23 results for 24 requests"),
        (lambda rs: None, "returned None for 24 requests"),
        (lambda rs: [-1.0] * len(rs), "returned a float where a ScoreResult belongs"),
        (lambda rs: [ScoreResult(5.0, 1)] * len(rs), "returned a positive log-prob (5) for 'A:3"),
    ]
    for i, (reply, said) in enumerate(cases):
        for cache in (None, ScoreCache(tmp_path / f"c{i}.sqlite")):
            with pytest.raises(ModelError, match=re.escape(said)):
                run_permutation(
                    loaded, loaded.items, CachedScorer(Broken(reply), cache),
                    tmp_path / f"r{i}{cache is None}", PermutationConfig(),
                )  # fmt: skip
    one = MCQItem("o", "q?", ("a",))
    with pytest.raises(ConfigError, match="'o' has 1 option"):
        run_permutation(
            loaded, [one], CachedScorer(Broken(None), None), tmp_path / "one", PermutationConfig()
        )
    from contamscope.pipeline import survey_permutation

    with pytest.raises(ConfigError, match="'o' has 1 option"):  # (it was surveyed; QA)
        survey_permutation(loaded, [one])


def test_loading_a_model_leaves_transformers_logging_as_it_was(tiny_model_path: Path) -> None:
    """load_backend silenced transformers' warnings and progress bars for the rest of the host
    program's process (library QA): only while the model loads now."""
    from transformers.utils import logging as hf_logging

    from contamscope.backends import load_backend
    from contamscope.backends.tokenizer import load_tokenizer

    hf_logging.set_verbosity_warning()
    hf_logging.enable_progress_bar()
    try:
        load_backend(f"hf:{tiny_model_path}")
        load_tokenizer(f"hf:{tiny_model_path}")
        assert hf_logging.get_verbosity() == hf_logging.WARNING
        assert hf_logging.is_progress_bar_enabled()
    finally:
        hf_logging.set_verbosity_error()


def test_run_folders_and_benchmark_files_are_taken_as_the_docs_give_them(
    tmp_path: Path, loaded: Any, tiny_backend: Any
) -> None:
    """A RunDir given to the report, records, compare, leaderboard and card functions was a
    TypeError ("expected str, bytes or os.PathLike object, not RunDir"), though the docs say
    a run folder may be a path or a RunDir; a pathlib.Path given to load_benchmark or load_qa
    was an AttributeError ('PosixPath' object has no attribute 'startswith'; typed-API QA)."""
    from contamscope.pipeline import compare_runs
    from contamscope.report import build_report
    from contamscope.report.card import write_card
    from contamscope.report.leaderboard import write_leaderboard
    from contamscope.store import RunDir, read_records

    scorer = CachedScorer(tiny_backend, ScoreCache(tmp_path / "c.sqlite"))
    for name in ("a", "b"):
        run_permutation(
            loaded, loaded.items, scorer, RunDir(str(tmp_path / name)), PermutationConfig()
        )
    a, b = RunDir(tmp_path / "a"), RunDir(tmp_path / "b")
    assert build_report(a) == tmp_path / "a" / "report.html"
    assert [r["id"] for r in read_records(a)] == [it.id for it in loaded.items]
    assert compare_runs(a, b)["statistics"]["n_items"] == 3
    text, path = write_leaderboard([a, b], tmp_path / "board.md")
    assert path == tmp_path / "board.md" and "toy" in text
    md, _, card = write_card([a], tmp_path / "card.md", "Tiny")
    assert md.is_file() and card["model"] == "Tiny"
    with pytest.raises(
        ConfigError, match=r"^run folder: expected a RunDir or a folder path, not int"
    ):
        read_records(3)  # type: ignore[arg-type]

    class BytesPath:
        def __fspath__(self) -> bytes:
            return b"runs"

    with pytest.raises(ConfigError, match=r"^run folder: expected a RunDir or a folder path"):
        read_records(BytesPath())  # type: ignore[arg-type]
    bench = Path(loaded.files[0])
    assert load_benchmark(bench).items == loaded.items
    qa = _write(tmp_path / "qa.jsonl", '{"question": "2+2?", "answer": "4"}\n')
    assert load_qa(qa).items[0].answer == "4"
    with pytest.raises(ConfigError, match=r"^benchmark: expected a name or a path, not int"):
        load_benchmark(3)  # type: ignore[arg-type]


def test_benbench_and_membership_summaries_hold_the_verdict_their_commands_print(
    tmp_path: Path, loaded: Any, tiny_backend: Any
) -> None:
    """The terminal printed a verdict for BenBench and membership runs that summary.json did
    not hold (output-files QA): it holds it now, as the permutation test's, and an outcome
    of a summary written before gives the same."""
    from contamscope.detectors.verdict import line_verdict
    from contamscope.pipeline.outcome import Outcome
    from contamscope.report.benbench import verdict_line as benbench_line
    from contamscope.report.membership import verdict_line as membership_line

    scorer = CachedScorer(tiny_backend, None)
    rows = [{"question": f"What is {a} plus 1?", "answer": f"It is {a + 1}."} for a in range(6)]
    qa = load_qa(_write(tmp_path / "toy_test.jsonl", "".join(json.dumps(r) + "\n" for r in rows)))
    pairs = {
        it.id: Paraphrase(f"Add 1 to {i}: what is it?", f"It is {i + 1}.", True, "")
        for i, it in enumerate(qa.items)
    }
    refs = [ReferenceSet("para", "p.jsonl", None, "id", pairs)]
    split = SplitInput.build("test", qa, references=refs)
    bb = run_benbench([split], scorer, tmp_path / "bb", BenBenchConfig(n_boot=100))
    member = run_membership(
        loaded,
        loaded.items[:2],
        loaded,
        loaded.items[2:],
        scorer,
        tmp_path / "m",
        MembershipConfig(n_boot=100),
    )
    for out, line in ((bb, benbench_line), (member, membership_line)):
        said = line(out.summary)
        assert said is not None
        v = out.summary["verdict"]
        assert v == line_verdict(said) == out.verdict and v["reasoning"] == said[1]
        assert v["label"] in ("leakage signal", "no evidence", "inconclusive", "nothing to test")
        assert v["signal"] is {"signal": True, "clean": False}.get(said[0])
        assert json.loads((out.run_dir / "summary.json").read_text())["verdict"] == v
        older = {k: x for k, x in out.summary.items() if k != "verdict"}
        assert Outcome(older, out.run_dir).verdict == v  # written before: the same
        # and its records are the folder's, now that the verdict is written (refused; QA)
        assert Outcome(older, out.run_dir).records() == out.records()


def test_a_run_folder_given_where_the_benchmark_belongs_is_named() -> None:
    """reanalyse_permutation("runs/x") bound the folder to ``loaded`` and said "missing a
    required argument: 'run_dir'", the one given (upgrade QA)."""
    from contamscope.pipeline import reanalyse_permutation

    with pytest.raises(ConfigError, match=r"^reanalyse_permutation\(\): the first argument is "):
        reanalyse_permutation("runs/x")  # type: ignore[call-arg]
    # the order named is the function's own (it said (splits, run_dir, ...) for run_benbench)
    with pytest.raises(ConfigError, match=r"give run_benbench\(splits, scorer, run_dir, \.\.\.\)$"):
        run_benbench("runs/x")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"^run_permutation\(\) missing a required argument"):
        run_permutation(None)  # type: ignore[call-arg]


def test_items_of_another_loaded_file_and_items_of_the_wrong_types_are_refused(
    tmp_path: Path, loaded: Any, tiny_backend: Any
) -> None:
    """Library QA: run_membership took another file's items (benchmark or reference side) and
    recorded the loaded file's source and subjects for them; run_benbench likewise; items
    with an int id, a None question or no options, a loaded benchmark given to select_items,
    a single reference file and a spec that is not text failed deep with raw Python errors."""
    other = load_benchmark(
        str(_write(tmp_path / "other_test.csv", "Is ice cold?,yes,no,maybe,never,A\n"))
    )
    scorer = CachedScorer(tiny_backend, None)
    config = MembershipConfig(n_boot=100)
    _refused(
        [
            (
                lambda: run_membership(
                    loaded, other.items, loaded, loaded.items[1:], scorer, tmp_path / "a", config
                ),
                f"benchmark items: {other.items[0].id!r} is not an item of the loaded benchmark",
            ),
            (
                lambda: run_membership(
                    loaded,
                    loaded.items[:1],
                    other,
                    loaded.items[1:],
                    scorer,
                    tmp_path / "b",
                    config,
                ),
                f"reference items: {loaded.items[1].id!r} is not an item of the loaded benchmark",
            ),
        ]
    )
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    qa = tmp_path / "q.jsonl"
    qa.write_text(json.dumps({"question": "1+1?", "answer": "2\n#### 2"}) + "\n", "utf-8")
    qa2 = tmp_path / "q2.jsonl"
    qa2.write_text(json.dumps({"question": "2+1?", "answer": "3\n#### 3"}) + "\n", "utf-8")
    one, two = load_qa(str(qa)), load_qa(str(qa2))
    _refused(
        [
            (
                lambda: run_benbench(
                    [SplitInput.build("test", one, two.items)],
                    scorer,
                    tmp_path / "c",
                    BenBenchConfig(),
                ),
                f"split test: {two.items[0].id!r} is not an item of the loaded benchmark",
            ),
            (lambda: SplitInput.build("test", one, references=two), "a single LoadResult"),
            (lambda: SplitInput.build("test", one, references=[3]), "a int among them"),
            (lambda: select_items(loaded), "give loaded.items"),
            (lambda: load_backend(None), "model spec: expected text"),  # type: ignore[arg-type]
            (lambda: load_backend("smollm2", options=["bos=x"]), "options: expected a mapping"),  # type: ignore[arg-type]
        ]
    )
    for args, message in [
        ((7, "q?", ("a", "b")), "item 7: id must be a string, not int"),
        (("x", None, ("a", "b")), "item x: question must be a string, not NoneType"),
        (("x", "q?", None), "options must be a sequence of strings, got None"),
        (("x", "q?", []), "item x: 0 options; between 1 and 10 are supported"),
        (("x", "q?", tuple("abcdefghijk")), "11 options"),
    ]:
        with pytest.raises(DataError, match=re.escape(message)):
            MCQItem(*args)
    with pytest.raises(DataError, match="answer must be a string, not int"):
        QAItem("x", "q?", 3)  # type: ignore[arg-type]
    assert MCQItem("g", "q?", (o for o in ("a", "b"))).options == ("a", "b")
