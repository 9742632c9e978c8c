"""Documented contracts of the validate command's machinery (validate/data.py, train.py,
pipeline.py, permutation.py, benbench.py, cap.py), each checked against a value derived here
(mutation QA)."""

from __future__ import annotations

import copy
import math
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from contamscope.data.cap import CapData, CapSplit
from contamscope.data.items import LoadResult, MCQItem, QAItem
from contamscope.errors import ConfigError
from contamscope.perturb import TEMPLATES
from contamscope.pipeline.benbench import BenBenchConfig
from contamscope.pipeline.cap import CapConfig
from contamscope.pipeline.membership import MembershipConfig
from contamscope.store import CachedScorer, RunDir
from contamscope.validate import (
    BenBenchValidation,
    CapValidation,
    PermutationValidation,
    Split,
    TrainConfig,
    ValidateConfig,
    ValidationMethod,
    cap_training_text,
    run_validation,
    split_items,
    train_epochs,
    training_order,
    training_text,
)
from contamscope.validate.data import draw_reference, option_set_key
from contamscope.validate.permutation import (
    AUTO_REFERENCE_ITEMS,
    _diagnostics,
    _membership_flag,
)
from contamscope.validate.pipeline import ScoreHooks, _say_unequal
from contamscope.validate.train import checkpoint_complete

TPL = TEMPLATES["paper"]


def _mcq(n: int, prefix: str = "q") -> list[MCQItem]:
    return [
        MCQItem(
            id=f"{prefix}{i}",
            question=f"Question {prefix}{i}?",
            options=(f"w{prefix}{i}", f"x{i}", f"y{i}", f"z{i}"),
            answer=0,
        )
        for i in range(n)
    ]


def _loaded(items: list[Any]) -> LoadResult[Any]:
    return LoadResult(items=items, problems=[], source="toy", format="toy", content_hash="0" * 64)


# ------------------------------------------------------------------------------ data.py


def test_a_seeded_coin_says_which_half_is_leaked() -> None:
    """split_items: "a seeded coin says which half is leaked": with an odd count of
    singletons the half holding the extra item is the leaked one in about half of the seeds,
    not always (mutation QA)."""
    items = _mcq(30)
    larger = sum(len(split_items(items, 9, seed=s).leaked) == 5 for s in range(200))
    assert 60 <= larger <= 140, larger


def test_blocks_are_placed_in_a_random_order_not_by_size() -> None:
    """split_items: "The groups are put in a seeded random order" (not size-biased): two
    option-set blocks of 4 among 8 singletons fall on different sides in many draws; ordered
    by size they would always fill the first half together (mutation QA)."""
    blocks = [
        MCQItem(id=f"{b}{i}", question=f"Q {b}{i}", options=(f"{b}1", f"{b}2"), answer=0)
        for b in "ab"
        for i in range(4)
    ]
    items = _mcq(8) + blocks
    apart = 0
    for seed in range(100):
        leaked = split_items(items, 16, seed=seed).leaked_ids
        apart += ("a0" in leaked) != ("b0" in leaked)
    assert apart >= 40, apart  # 75 of 100 here; 0 when ordered by size


def test_reference_items_are_never_evaluated_nor_share_an_option_set() -> None:
    """draw_reference: reference items are "never trained on, not evaluated, and not sharing an
    option set with any evaluated item" (mutation QA)."""
    block = ("Wrong", "Not wrong")
    shared = [
        MCQItem(id=f"m{i}", question=f"Scenario {i}", options=block, answer=0) for i in range(6)
    ]
    items = _mcq(6) + shared
    for seed in range(10):
        split = split_items(items, 6, seed=seed)
        pool = draw_reference(items, split, None, seed=seed)
        evaluated = {it.id for it in split.items}
        keys = {option_set_key(it) for it in split.items}
        assert not evaluated & {r.id for r in pool}, seed
        assert not keys & {option_set_key(r) for r in pool}, seed
        # every item outside the draw that shares no block with it is a candidate
        want = {it.id for it in items if it.id not in evaluated and option_set_key(it) not in keys}
        assert {r.id for r in pool} == want, seed


def test_scenario_b_orders_are_per_item_and_never_the_original() -> None:
    """training_order: scenario b "draws a non-identity order from a generator seeded by
    ``seed`` and the item id" (one random order per item: the items do not all share one);
    the identity is never returned (mutation QA)."""
    items = _mcq(40)
    for seed in range(5):
        orders = [training_order(it, "b", seed) for it in items]
        assert all(o != (0, 1, 2, 3) and sorted(o) == [0, 1, 2, 3] for o in orders)
        assert len(set(orders)) > 5, seed


def test_training_text_writes_the_options_in_the_given_order() -> None:
    """training_text: "the scored prefix followed by the option block" in ``order`` (scenario
    b trains each leaked item in its recorded order; mutation QA)."""
    item = _mcq(1)[0]
    order = (2, 0, 3, 1)
    text = training_text(item, TPL, order)
    assert text == TPL.prefix(item) + TPL.continuation(item, order)
    assert text.endswith("A:y0\nB:wq0\nC:z0\nD:x0\n")


# ------------------------------------------------------------------------------ train.py


def _tiny_lm() -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=61,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    model.eval()
    return model


SEQS = [[1, 5, 9, 14, 3, 7, 2], [1, 40, 41, 2], [1, 20, 21, 22, 23, 24, 25, 26, 27, 2]]


def _summed_ce(model: Any, seq: list[int]) -> float:
    ids = torch.tensor([seq])
    logits = model(input_ids=ids).logits[0, :-1].double()
    return float(torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="sum"))


def test_train_config_defaults_are_the_documented_ones() -> None:
    """TrainConfig / docs/validation.md: "AdamW (weight decay 0, gradients clipped at global
    norm 1.0), constant learning rate (--lr, 1e-4 ...), ... --train-batch-items texts a step, 8"
    (the Python API's defaults are the command's; mutation QA)."""
    cfg = TrainConfig()
    assert (cfg.lr, cfg.batch_items, cfg.weight_decay, cfg.max_grad_norm, cfg.seed) == (
        1e-4,
        8,
        0.0,
        1.0,
        0,
    )


def test_epoch_log_holds_the_mean_target_token_loss_before_the_step() -> None:
    """EpochLog: ``mean_loss`` is the "mean token-level cross-entropy over the epoch (nats per
    token, before each step)" and ``tokens`` the "target tokens trained on": with one step an
    epoch, epoch 1's mean loss is the untouched model's summed loss over every text divided by
    the count of predicted tokens (each text's length less one; mutation QA)."""
    model = _tiny_lm()
    with torch.no_grad():
        want = sum(_summed_ce(model, s) for s in SEQS) / sum(len(s) - 1 for s in SEQS)
    logs = train_epochs(model, SEQS, 1, TrainConfig(lr=1e-3, batch_items=len(SEQS)))
    assert logs[0].steps == 1
    assert logs[0].tokens == sum(len(s) - 1 for s in SEQS)
    assert logs[0].mean_loss == pytest.approx(want, rel=1e-5)


def _reference_training(
    model: Any, seqs: list[list[int]], lr: float, weight_decay: float, clip: float
) -> Any:
    """One epoch, one text a step, in the given order: AdamW (betas 0.9 / 0.999, eps 1e-8) on
    each step's summed loss divided by its predicted tokens, clipped at ``clip`` (0: not)."""
    model = copy.deepcopy(model)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr, (0.9, 0.999), 1e-8, weight_decay)
    for seq in seqs:
        opt.zero_grad()
        ids = torch.tensor([seq])
        logits = model(input_ids=ids).logits[0, :-1].float()
        loss = torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="sum")
        (loss / (len(seq) - 1)).backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(params, clip)
        opt.step()
    return model


@pytest.mark.parametrize(("weight_decay", "clip"), [(0.0, 0.0), (0.1, 0.0), (0.0, 0.5)])
def test_training_is_adamw_on_the_per_token_loss_of_each_step(
    weight_decay: float, clip: float
) -> None:
    """train.py: "Causal-LM loss on every token of each training text ..., AdamW at a constant
    learning rate, a seeded shuffle per epoch"; TrainConfig: weight decay as given, gradient
    clipping "(global L2 norm); 0 disables it". One text a step: the trained weights are a
    plain AdamW loop's on the step's loss per predicted token, in one of the orders of the
    texts (texts of unequal lengths, so that the per-token scaling matters; mutation QA)."""
    import itertools

    base = _tiny_lm()
    seqs = SEQS[:2]
    model = copy.deepcopy(base)
    cfg = TrainConfig(lr=1e-2, batch_items=1, weight_decay=weight_decay, max_grad_norm=clip)
    train_epochs(model, seqs, 1, cfg)
    got = [p.detach() for p in model.parameters()]
    moved = [not torch.equal(p, q) for p, q in zip(got, base.parameters())]
    assert any(moved)  # clipping disabled (0) still trains
    errors = []
    for order in itertools.permutations(seqs):
        ref = _reference_training(base, list(order), 1e-2, weight_decay, clip)
        errors.append(
            max(
                float((p - q.detach()).abs().max())
                for p, q in zip(got, ref.parameters(), strict=True)
            )
        )
    assert min(errors) < 2e-5, errors


def test_the_training_seed_shuffles_the_texts() -> None:
    """TrainConfig.seed: "Seed of the torch generator and of the per-epoch shuffles": one text
    a step, other seeds put the texts in other orders, so not every seed trains the same
    weights (mutation QA)."""
    base = _tiny_lm()
    finals = []
    for seed in range(4):
        model = copy.deepcopy(base)
        train_epochs(model, SEQS, 1, TrainConfig(lr=1e-2, batch_items=1, seed=seed))
        finals.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert any(not torch.equal(finals[0], f) for f in finals[1:])


def test_a_checkpoint_without_its_done_marker_is_not_complete(tmp_path: Path) -> None:
    """train.py: the done-marker "is written last into a checkpoint folder; its presence means
    the folder is complete": a folder holding the model's config.json but no marker (a save
    cut short) is not complete, nor is a marker without the model (mutation QA)."""
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    assert not checkpoint_complete(folder)
    (folder / "contamscope-train.json").write_text("{}")
    assert checkpoint_complete(folder)
    (folder / "config.json").unlink()
    assert not checkpoint_complete(folder)


# ------------------------------------------------------------------------------ pipeline.py


@pytest.mark.parametrize("epochs", [(0, 1), (1, 1, 2), (2, 1)])
def test_epochs_must_be_positive_increasing_and_distinct(epochs: tuple[int, ...]) -> None:
    """ValidateConfig: "--epochs must be positive integers" and "increasing and distinct"
    (mutation QA)."""
    with pytest.raises(ConfigError, match="--epochs must be"):
        ValidateConfig(epochs=epochs)


def test_the_seed_is_part_of_what_a_rerun_must_match() -> None:
    """ValidateConfig.settings: "What must match for a re-run to reuse the folder"; the seed
    draws the items and trains the copy, so another seed is another run; epochs and baseline
    are not (mutation QA)."""
    a = ValidateConfig(seed=0).settings()
    assert ValidateConfig(seed=1).settings() != a
    assert ValidateConfig(epochs=(2,), baseline=False, keep_checkpoints=False).settings() == a


@pytest.mark.parametrize(("leaked", "clean", "said"), [(4, 6, False), (6, 4, False), (3, 7, True)])
def test_unequal_halves_note_starts_under_forty_percent(
    leaked: int, clean: int, said: bool
) -> None:
    """_say_unequal: "A note where one half of the draw is under 40% of it": 4 of 10 is not
    under 40%, 3 of 10 is (mutation QA)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _say_unequal(leaked, clean)
    notes = [str(w.message) for w in caught if "halves are unequal" in str(w.message)]
    assert bool(notes) == said
    if said:
        assert f"{leaked} leaked and {clean} clean items" in notes[0]


def test_split_counts_name_each_half() -> None:
    """summary.json ``split``: ``n_leaked`` counts the items trained on, ``n_clean`` the others
    (with unequal halves; mutation QA)."""
    items = _mcq(5)
    split = Split(items=tuple(items), leaked=tuple(items[:1]), clean=tuple(items[1:]))
    method = PermutationValidation(_loaded(items), reference_items=0)
    counts = method.split_counts(split)
    assert (counts["n_items"], counts["n_leaked"], counts["n_clean"]) == (5, 1, 4)


class _Recorder(ValidationMethod):
    """A method whose pipeline reads nothing: it counts what the shared pipeline asks of it."""

    name = "permutation"

    def __init__(self, items: list[QAItem]) -> None:
        self.items = items
        self.trained = 0

    def benchmark(self) -> dict[str, Any]:
        return {"source": "toy", "format": "toy", "content_hash": "0" * 64, "items_loaded": 4}

    def settings(self) -> dict[str, Any]:
        return {"validated_method": "recorder"}

    def skipped_rows(self) -> list[str]:
        return []

    def draw(self, n_items: int, seed: int) -> Split:
        return split_items(self.items, n_items, seed=seed)

    def split_record(self, split: Split) -> dict[str, Any]:
        return {"leaked": sorted(split.leaked_ids), "clean": [it.id for it in split.clean]}

    def training_texts(self, split: Split) -> list[str]:
        self.trained += 1
        return [f"{it.question} {it.answer}" for it in split.leaked]

    def score(
        self,
        scorer: CachedScorer,
        run_dir: RunDir,
        split: Split,
        *,
        overwrite: bool,
        hooks: ScoreHooks,
    ) -> list[dict[str, Any]]:
        return [{"id": it.id} for it in split.items]

    def evaluate(self, records: list[dict[str, Any]], split: Split) -> dict[str, Any]:
        return {"n": len(records)}

    def describe(self) -> dict[str, str]:
        return {}


def _qa(n: int) -> list[QAItem]:
    return [
        QAItem(id=f"g{i}", question=f"What is {i} plus one?", answer=str(i + 1)) for i in range(n)
    ]


def _run(method: _Recorder, model: Path, out: Path, **kw: Any) -> dict[str, Any]:
    config = ValidateConfig(
        n_items=4,
        epochs=(1,),
        baseline=False,
        train=TrainConfig(lr=1e-3, batch_items=2),
        keep_checkpoints=kw.pop("keep", True),
    )
    return run_validation(
        method,
        f"hf:{model}",
        config,
        out,
        device="cpu",
        dtype="float32",
        options={"bos": "<|endoftext|>"},
        **kw,
    ).summary


def test_checkpoints_are_kept_reused_deleted_and_redone_as_asked(
    tmp_path: Path, tiny_model_path: Path
) -> None:
    """ValidateConfig.keep_checkpoints: "Keep the checkpoint folders after scoring (needed to
    resume without retraining)"; --delete-checkpoints: "Delete each checkpoint after scoring
    it (a re-run must then retrain)"; --overwrite starts the run again (its checkpoints are
    trained anew); an unreadable train_log.json counts as none. (mutation QA)"""
    method = _Recorder(_qa(6))
    out = tmp_path / "run"
    ckpt = out / "checkpoints" / "epoch-1"
    summary = _run(method, tiny_model_path, out)
    assert method.trained == 1 and checkpoint_complete(ckpt)
    assert summary["split"]["n_leaked"] == 2 and [r["epochs"] for r in summary["results"]] == [1]
    assert summary["config"]["baseline"] is False and summary["config"]["epochs"] == [1]
    _run(method, tiny_model_path, out)  # the kept checkpoint is reused: no training
    assert method.trained == 1
    (ckpt / "stale.txt").write_text("from the earlier run")
    (out / "train_log.json").write_text("[1, 2]\n")  # unreadable as a log: as if none
    again = _run(method, tiny_model_path, out, overwrite=True)
    assert method.trained == 2 and not (ckpt / "stale.txt").exists()
    assert [t["epoch"] for t in again["training"]] == [1]
    _run(method, tiny_model_path, out, keep=False)
    assert method.trained == 2 and not ckpt.exists()


# ------------------------------------------------------------------------------ permutation.py


def test_membership_flag_is_p_at_most_alpha() -> None:
    """The membership and reference-calibrated detectors flag an item at "conformal p-value
    <= alpha": a p-value of exactly alpha is flagged (mutation QA)."""
    flag = _membership_flag("gap", 0.05)
    assert flag({"membership_p": {"gap": 0.05}})
    assert not flag({"membership_p": {"gap": 0.0500001}})
    assert not flag({"membership_p": {}})


def test_reference_count_that_can_reach_alpha_is_accepted() -> None:
    """PermutationValidation: with k reference items the smallest p-value is 1/(k + 1); k is
    refused only where that cannot reach alpha: 19 references at alpha 0.05 (smallest p-value
    exactly 0.05) are accepted, 18 refused (mutation QA)."""
    loaded = _loaded(_mcq(40))
    PermutationValidation(loaded, reference_items=19, membership=MembershipConfig(alpha=0.05))
    with pytest.raises(ConfigError, match="--reference-items 18"):
        PermutationValidation(loaded, reference_items=18, membership=MembershipConfig(alpha=0.05))


@pytest.mark.parametrize(("available", "drawn"), [(19, 19), (18, 0), (150, AUTO_REFERENCE_ITEMS)])
def test_automatic_reference_count(available: int, drawn: int) -> None:
    """PermutationValidation.reference_items None: "up to AUTO_REFERENCE_ITEMS (100) of those
    available, left out when fewer than 1/alpha are" (k items reach p = 1/(k + 1), so 19 are
    enough at alpha 0.05 and 18 are not); docs/validation.md: "plus 100 reference items"
    (mutation QA)."""
    assert AUTO_REFERENCE_ITEMS == 100
    items = _mcq(4 + available)
    method = PermutationValidation(_loaded(items), membership=MembershipConfig(alpha=0.05))
    split = method.draw(4, 0)
    assert method.split_counts(split)["n_reference"] == drawn


def test_scenario_b_trains_and_records_each_leaked_items_own_order() -> None:
    """Scenario b: each leaked item is trained "in one random non-original order ..., recorded
    per item" (split.json ``training_order``) and its training text is written in that order
    (mutation QA)."""
    items = _mcq(10)
    method = PermutationValidation(_loaded(items), scenario="b", seed=3, reference_items=0)
    split = method.draw(10, 3)
    record = method.split_record(split)
    orders = {x["id"]: tuple(x["training_order"]) for x in record["leaked"]}
    assert set(orders) == split.leaked_ids
    for it in split.leaked:
        assert orders[it.id] == training_order(it, "b", 3) != (0, 1, 2, 3)
    texts = method.training_texts(split)
    tpl = method.permutation.template
    assert texts == [training_text(it, tpl, orders[it.id]) for it in split.leaked]


def test_diagnostics_compare_leaked_and_clean_analysed_items() -> None:
    """_diagnostics: "Mean log-prob of the original order and mean gap, leaked vs clean" over
    the analysed items: excluded records (reference items, calibration) count in neither
    (mutation QA)."""
    records = [
        {"id": "l1", "logprobs": [-1.0, -5.0], "gap": 4.0},
        {"id": "l2", "logprobs": [-3.0, -5.0], "gap": 2.0},
        {"id": "c1", "logprobs": [-9.0, -8.0], "gap": -1.0},
        {"id": "r1", "logprobs": [-50.0, -1.0], "gap": -49.0, "excluded": "reference item"},
    ]
    d = _diagnostics(records, {"l1", "l2"})
    assert d["leaked"] == {"n": 2, "mean_original_logprob": -2.0, "mean_gap": 3.0}
    assert d["clean"] == {"n": 1, "mean_original_logprob": -9.0, "mean_gap": -1.0}


def _perm_record(item_id: str, logprobs: list[float], stat: float) -> dict[str, Any]:
    from contamscope.detectors import Algorithm2
    from contamscope.detectors.permutation import score_item

    rec = score_item(
        logprobs, n_options=2, exhaustive=True, alg2=Algorithm2(deltas=(-0.2,))
    ).to_dict()
    stats = {"min_k_pp": stat, "min_k": stat, "loss": stat, "zlib": stat}
    return rec | {"id": item_id, "logprobs": logprobs, "membership": stats}


def test_excluded_counts_the_evaluated_items_not_the_references() -> None:
    """Per epoch ``excluded`` counts evaluated items the permutation pipeline left out; the
    reference items are stored as excluded records (calibration) but are not evaluated, so
    they count neither there nor in the detectors' n or the diagnostics (mutation QA)."""
    from contamscope.pipeline import PermutationConfig

    items = _mcq(4)
    method = PermutationValidation(
        _loaded(items), permutation=PermutationConfig(deltas=(-0.2,)), reference_items=0
    )
    method._reference = tuple(_mcq(20, "r"))  # as draw() would hold them
    split = Split(items=tuple(items), leaked=tuple(items[:2]), clean=tuple(items[2:]))
    records = [_perm_record(it.id, [-1.0 - i, -3.0], float(i)) for i, it in enumerate(items)] + [
        _perm_record(r.id, [-4.0, -2.0 - i / 10], -float(i))
        | {"role": "reference", "excluded": "reference item (calibration)"}
        for i, r in enumerate(method._reference)
    ]
    res = method.evaluate(records, split)
    assert res["excluded"] == 0
    assert all(m["n"] == 4 for m in res["detectors"].values())
    assert "membership-min_k_pp@0.05" in res["detectors"]
    d = res["diagnostics"]
    assert (d["leaked"]["n"], d["clean"]["n"]) == (2, 2)


# ------------------------------------------------------------------------------ benbench.py


def _bb_record(
    item_id: str, exact: float | None, ppl: float, flagged: bool = False
) -> dict[str, Any]:
    original = {"ngram_exact": exact, "ngram_rouge": exact, "ngram_edit": exact, "ppl": ppl}
    original["nll"] = math.log(ppl) if math.isfinite(ppl) else ppl
    return {
        "id": f"test/{item_id}",
        "item_id": item_id,
        "flags": {"exact_all": flagged, "rouge_all": flagged, "edit_all": flagged},
        "metrics": {"original": original},
    }


def _bb_split() -> tuple[BenBenchValidation, Split]:
    items = _qa(6)
    split = Split(items=tuple(items), leaked=tuple(items[:3]), clean=tuple(items[3:]))
    return BenBenchValidation(_loaded(items)), split


def test_benbench_trains_on_question_and_answer_joined_by_a_space() -> None:
    """docs/validation.md: the leaked half is trained on "`{question} {answer}`: question and
    full worked answer joined by a space" (mutation QA)."""
    method, split = _bb_split()
    assert method.training_texts(split) == [f"{it.question} {it.answer}" for it in split.leaked]


def test_benbench_scores_and_gaps_point_the_documented_way() -> None:
    """BenBench validation: perplexity AUC ranks "lower answer perplexity = more likely leaked";
    the gaps are "mean(leaked) - mean(clean)"; items without an n-gram are "ranked last" in the
    n-gram AUC; a non-finite perplexity is left out of its AUC (mutation QA)."""
    method, split = _bb_split()
    records = [
        _bb_record("g0", 1.0, 1.5, flagged=True),
        _bb_record("g1", None, 2.0),
        _bb_record("g2", 0.8, 2.5),
        _bb_record("g3", 0.5, 3.0),
        _bb_record("g4", 0.1, 3.5),
        _bb_record("g5", 0.0, 4.0),
    ]
    res = method.evaluate(records, split)
    assert res["scores"]["perplexity"]["auc"] == 1.0 and res["scores"]["perplexity"]["n"] == 6
    gap = res["gaps"]["ppl"]
    assert gap["leaked"] == pytest.approx(2.0) and gap["gap"] == pytest.approx(2.0 - 3.5)
    assert res["gaps"]["ngram_exact"]["gap"] == pytest.approx(0.9 - 0.2)
    det = res["detectors"]["ngram-exact-all"]
    assert (det["tp"], det["fp"], det["fn"], det["tn"]) == (1, 0, 2, 3)
    # g1 (no n-gram) ranks below every clean item: 2 leaked items above 3 clean, 1 below
    assert det["auc"] == pytest.approx(6 / 9)
    assert res["excluded"] == 0
    # a non-finite perplexity (a leaked item's here) is left out of the AUC, not ranked
    records[2] = _bb_record("g2", 0.8, math.inf)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (numpy warned of inf - inf in the gap's bootstrap)
        again = method.evaluate(records, split)
    ppl = again["scores"]["perplexity"]
    assert ppl["n"] == 5 and ppl["auc"] == 1.0
    # ... and out of the perplexity gap alike (it was -inf; QA)
    gap = again["gaps"]["ppl"]
    assert (gap["n_leaked"], gap["n_clean"]) == (2, 3)
    assert gap["leaked"] == pytest.approx(1.75) and gap["gap"] == pytest.approx(1.75 - 3.5)


def test_benbench_lenient_flags_and_excluded_count() -> None:
    """BenBench validation: the lenient ROUGE-L and edit-similarity flags are measured "with
    --lenient" only (the default), the exact one always; ``excluded`` counts the records left
    out (mutation QA)."""
    method, split = _bb_split()
    records = [_bb_record(f"g{i}", 0.5, 2.0) for i in range(6)]
    records[5]["excluded"] = "text shorter than n + 2 tokens: no n-gram"
    res = method.evaluate(records, split)
    assert list(res["detectors"]) == ["ngram-exact-all", "ngram-rouge-all", "ngram-edit-all"]
    assert res["excluded"] == 1 and res["detectors"]["ngram-exact-all"]["n"] == 5
    strict = BenBenchValidation(method.loaded, BenBenchConfig(lenient=False))
    assert list(strict.evaluate(records, split)["detectors"]) == ["ngram-exact-all"]


# ------------------------------------------------------------------------------ cap.py


def _cap(trained: str, n: int = 3, modified: dict[str, Any] | None = None) -> CapValidation:
    dev = [
        MCQItem(id=f"d{i}", question=f"Dev {i}?", options=("a", "b"), answer=0) for i in range(n)
    ]
    test = [
        MCQItem(id=f"t{i}", question=f"Test {i}?", options=("a", "b"), answer=1, meta=m)
        for i, m in enumerate([{"input": "Given prompt 0:"}] + [{}] * (n - 1))
    ]
    data = CapData(
        task="mcq",
        task_detected=False,
        splits={"dev": CapSplit("dev", dev), "test": CapSplit("test", test, modified)},
        problems=[],
        source="toy",
        format="toy",
        content_hash="0" * 64,
    )
    return CapValidation(data, trained_split=trained, cap=CapConfig(task="mcq"))


def test_cap_trains_on_the_trained_splits_items() -> None:
    """CapValidation: "The split whose sampled items are trained on": the leaked items are the
    trained split's; --n-items equal to a split's size takes all of it (mutation QA)."""
    for trained in ("dev", "test"):
        method = _cap(trained)
        split = method.draw(3, 0)
        assert {it.id[0] for it in split.leaked} == {trained[0]}
        assert {it.id[0] for it in split.clean} == {method.other_split[0]}
    with pytest.raises(ConfigError, match="has only 3 items"):
        _cap("test").draw(4, 0)


def test_cap_expected_verdict_names_the_trained_split() -> None:
    """cap.py: "``fine-tuned on <reference>`` when the reference split was trained on,
    ``contaminated by <other>`` when the other one was" (the first split is the reference;
    mutation QA)."""
    assert _cap("dev").expected_verdict == "fine-tuned on dev"
    assert _cap("test").expected_verdict == "contaminated by test"


def test_cap_training_text_of_qa_and_of_supplied_prompts() -> None:
    """cap_training_text: QA is "the reference after a space"; multiple choice is "the prompt
    the CAP pipeline sends": an item's own supplied input where the data supply one (FinEval),
    then the answer letter (mutation QA)."""
    qa = QAItem(id="g", question="What is 2 + 2?", answer="4")
    assert cap_training_text(qa, "qa") == "What is 2 + 2? 4"
    method = _cap("test", modified={"t0": object()})
    split = method.draw(3, 0)
    texts = dict(zip((it.id for it in split.leaked), method.training_texts(split)))
    assert texts["t0"] == "Given prompt 0: B"
    assert texts["t1"] == "Question: Test 1?\nA. a\nB. b\nAnswer: B"
