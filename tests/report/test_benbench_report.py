"""BenBench report sections and leaderboard cells: synthetic runs (summary from the pipeline's own
build_summary) with known Deltas, and a real tiny-model run."""

from __future__ import annotations

import html
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from contamscope.detectors.verdict import p_text
from contamscope.report import build_report, collect, load_run
from contamscope.report.benbench import estimate
from contamscope.report.leaderboard import to_html, to_markdown


def _table_data(html: str, table: str = "items") -> dict[str, Any]:
    m = re.search(rf'<script type="application/json" id="data-{table}">(.*?)</script>', html, re.S)
    assert m, f"no table {table}"
    return json.loads(m.group(1).replace("<\\/", "</"))


def test_leaked_run_report(make_benbench_run) -> None:
    run = make_benbench_run(n_per_split=30, leaked=True)
    s = json.loads((run / "summary.json").read_text())
    d = s["statistics"]["splits"]["test"]["delta"]["ngram_exact"]
    assert d["ci"][0] > 0 and d["n"] == 29  # item 0 lost its paraphrase
    html = build_report(run).read_text()
    sections = re.findall(r'<section id="([a-z-]+)">', html)
    assert sections == ["verdict", "evidence", "hits", "items", "provenance"]
    assert '<div class="verdict signal">LEAK SIGNAL on test' in html
    assert f"Δ {100 * d['delta']:+.1f} pp, 95% CI [{100 * d['ci'][0]:+.1f}, " in html
    inst = s["statistics"]["splits"]["test"]["instances"]["exact_all"]
    assert f"{inst['count']} of {inst['of']} test items have every one of their 5 5-grams" in html
    assert "<h3>Δ_train − Δ_test</h3>" in html
    dtt = s["statistics"]["delta_train_test"]["ngram_exact"]
    assert f"<td>{100 * dtt['value']:+.1f} pp</td>" in html
    # accuracy bars, Δ accuracy forest, Δ NLL forest, per-item NLL scatter, accuracy histogram
    assert html.count('<svg role="img" class="fig"') == 5
    # instance-level hits: true vs predicted n-grams of the best-predicted items
    hits = re.findall(r"<details open><summary><b>([^<]+)</b>", html)
    assert len(hits) == 8 and all(h.startswith("test/") for h in hits[:3])
    assert "<pre> true gram 0</pre>" in html and "other 1 &lt;/script&gt;" in html
    items = _table_data(html)
    assert len(items["rows"]) == 60
    first = items["rows"][0]
    rec = json.loads((run / "items.jsonl").read_text().splitlines()[0])
    assert first[0] == "test/item-0" and first[3] == pytest.approx(
        rec["metrics"]["original"]["ppl"]
    )
    assert "final answer changed" in first[-2]
    assert "<b>bold</b>" not in html  # user text escaped


def test_few_items_get_no_interval_and_the_exact_p_decides(make_benbench_run) -> None:
    # 3 paired items, every original predicted better: a bootstrap interval of 3 items is the
    # range of their own differences (it lay above 0, and covers at most 75% of the time), so
    # none is given; which of an item's 2 versions is the original has 2^3 = 8 equally likely
    # choices under H0, so p = 1/8 and no signal
    run = make_benbench_run("few", n_per_split=4, leaked=True)
    s = json.loads((run / "summary.json").read_text())
    d = s["statistics"]["splits"]["test"]["delta"]["ngram_exact"]
    assert d["n"] == 3 and d["ci"] is None and d["ci_note"].startswith("fewer than 5 items")
    assert d["p_value"] == pytest.approx(1 / 8) and d["test"] == "randomization (exact)"
    html = build_report(run).read_text()
    assert '<div class="verdict clean">no evidence on test' in html
    assert "no CI (fewer than 5 items), p 0.125 (absence of evidence" in html
    assert "No CI where none is shown: fewer than 5 items" in html
    # 29 such items reject H0: the verdict names the leak
    big = make_benbench_run("many", n_per_split=30, leaked=True)
    assert '<div class="verdict signal">LEAK SIGNAL' in build_report(big).read_text()


def test_estimate_and_clean_run(make_benbench_run) -> None:
    run = make_benbench_run("clean", leaked=False, seed=4)
    s = json.loads((run / "summary.json").read_text())
    d = s["statistics"]["splits"]["test"]["delta"]["ngram_exact"]
    est = estimate(load_run(run))
    assert est is not None
    assert est.statistic == "Δ 5-gram accuracy (test)"
    assert est.value == d["delta"] and est.ci == tuple(d["ci"]) and est.n_items == d["n"]
    assert est.p_value == d["p_value"] and est.percent is True and est.leak_sign == 1
    assert d["p_value"] > 0.05 and d["test"] == "randomization (Monte Carlo)"
    assert "original − paraphrase" in est.legend
    html = build_report(run).read_text()
    assert d["ci"][0] <= 0 <= d["ci"][1]
    assert '<div class="verdict clean">no evidence on test' in html


def test_leaderboard_with_all_three_methods(make_run, make_cap_run, make_benbench_run) -> None:
    runs = [make_run("perm", n_items=24), make_cap_run("cap"), make_benbench_run("bb")]
    entries = collect(runs)
    assert [e.module.rsplit(".", 1)[1] for e in entries] == ["permutation", "cap", "benbench"]
    md = to_markdown(entries)
    head = md.splitlines()[0]
    assert "gsm8k_test.jsonl + gsm8k_train.jsonl (BenBench (n-gram accuracy, perplexity))" in head
    # the method is named once: 'BenBench (...) (BenBench Δ ...): BenBench: Δ ...' (QA)
    assert "- BenBench (n-gram accuracy, perplexity) (Δ 5-gram accuracy (test)): Δ n-gram" in md
    assert entries[2].estimate.text() in md
    # three benchmark sources (the BenBench one is its test + train pair), three methods
    assert "× 3 benchmarks (3 methods) from 3 runs" in to_html(entries)
    # one method's runs under two statistics are one method (it read '4 methods'; HTML QA)
    other_stat = [replace(entries[2], method="BenBench: other statistic")]
    assert "(3 methods) from 4 runs" in to_html([*entries, *other_stat])
    # the board's headline counts rejections per run's own test and after Holm over all of
    # them (it used to print the smallest p, one- and two-sided p-values mixed, uncorrected);
    # two weak permutation runs (verdict p 0.042 and 0.044) pass alone but not after Holm
    runs += [
        make_run("weak1", n_items=9, leaked_every=4, seed=2),
        make_run("weak2", n_items=9, leaked_every=4, seed=3),
    ]
    entries = collect(runs)
    md = to_markdown(entries)
    ps = sorted(e.estimate.p_value for e in entries if e.estimate.p_value is not None)
    raw = sum(p <= 0.05 for p in ps)
    stepdown = next((i for i, p in enumerate(ps) if p > 0.05 / (len(ps) - i)), len(ps))
    line = (
        f"{raw} of {len(ps)} runs with a p-value reject H0 (no leakage) at 5%; "
        f"{stepdown} after Holm's correction over all {len(ps)}"
    )
    assert line in md and html.escape(line) in to_html(entries) and stepdown < raw
    assert "smallest p" not in to_html(entries)


def test_tiny_model_benbench_run_report(tiny_benbench_run: Path) -> None:
    s = json.loads((tiny_benbench_run / "summary.json").read_text())
    html = build_report(tiny_benbench_run).read_text()
    assert "test split: 3 items analysed, 2 with a usable paraphrase" in html
    assert html.count('<svg role="img" class="fig"') == 5
    assert len(_table_data(html)["rows"]) == 5
    d = s["statistics"]["splits"]["test"]["delta"]["ngram_exact"]
    assert d["n"] == 2 and d["original"] == d["reference"] == 0  # a random model: no hit
    assert estimate(load_run(tiny_benbench_run)) is None  # so no leaderboard cell


def test_card_refuses_mixed_models_and_a_json_name_and_says_its_n(
    make_benbench_run, tmp_path: Path
) -> None:
    """`card` made one card for two models, overwrote its Markdown when --out ended in .json,
    raised IsADirectoryError on a folder, KeyError on an incomplete summary, repeated a run
    given twice, and titled the column '5-gram' whatever --n was."""
    from typer.testing import CliRunner

    from contamscope.cli.main import app

    a = make_benbench_run("a")
    b = make_benbench_run("b")
    s = json.loads((b / "summary.json").read_text())
    s["model"].update(spec="hf:other-model", fingerprint="synthetic:other")
    (b / "summary.json").write_text(json.dumps(s))
    runner = CliRunner()

    def card(*args: str) -> Any:
        return runner.invoke(app, ["card", *args])

    r = card("--run", str(a), "--run", str(b), "--out", str(tmp_path / "c.md"))
    assert r.exit_code == 2 and "the runs are of 2 models" in r.output
    r = card("--run", str(a), "--out", str(tmp_path / "c.json"))
    assert r.exit_code == 2 and "name the Markdown card (.md)" in r.output
    (tmp_path / "dir.md").mkdir()
    r = card("--run", str(a), "--out", str(tmp_path / "dir.md"))
    assert r.exit_code == 2 and "is a folder" in r.output
    r = card("--run", str(a), "--run", str(a / "summary.json"), "--out", str(tmp_path / "ok.md"))
    assert r.exit_code == 0, r.output
    text = (tmp_path / "ok.md").read_text()
    n = json.loads((a / "summary.json").read_text())["config"]["n"]
    assert f"{n}-gram acc orig / para" in text
    d = json.loads((a / "summary.json").read_text())["statistics"]["splits"]["test"]["delta"]
    p_acc = d["ngram_exact"]["p_value"]
    assert f"{100 * d['ngram_exact']['ci'][1]:+.1f}], p {p_text(p_acc)} |" in text
    card_json = json.loads((tmp_path / "ok.json").read_text())
    assert card_json["checks"][0]["delta"]["ngram_exact"]["p_value"] == p_acc
    # the NLL Delta, whose interval the docs say to read where perplexity's falls short, was
    # in card.json alone; and the card did not say what no signal cannot show (QA)
    nll = d["nll"]
    assert f"{nll['ci'][1]:+.3f}], p {p_text(nll['p_value'])} |" in text
    assert "| Delta NLL [95% CI], p |" in text and "Nor is their absence proof" in text
    assert "p: two-sided split-label permutation test" in text
    rows = [ln for ln in text.splitlines() if ln.startswith("| ") and "split" not in ln]
    assert len(rows) == len({ln for ln in rows})  # the run given twice makes no repeated row


def test_card_updates_its_own_model_and_refuses_another_models_card(
    make_benbench_run, tmp_path: Path
) -> None:
    """A second `contamscope card` for another model replaced the first one's card.md (the
    default --out) without a word (journey audit)."""
    from typer.testing import CliRunner

    from contamscope.cli.main import app

    a = make_benbench_run("a")
    b = make_benbench_run("b")
    s = json.loads((b / "summary.json").read_text())
    s["model"].update(spec="hf:other-model", fingerprint="synthetic:other")
    (b / "summary.json").write_text(json.dumps(s))
    out = tmp_path / "card.md"

    def card(*args: str) -> Any:
        return CliRunner().invoke(app, ["card", *args, "--out", str(out)])

    assert card("--run", str(a)).exit_code == 0
    first = out.read_text(encoding="utf-8")
    assert "# Benchmark Transparency Card: Model A\n" not in first
    assert card("--run", str(a), "--model-name", "Model A").exit_code == 0  # same model: updated
    assert "# Benchmark Transparency Card: Model A\n" in out.read_text(encoding="utf-8")
    r = card("--run", str(b))
    assert r.exit_code == 2 and "holds the card of another model" in r.output
    # another extension has a JSON of its own: card.txt's was card.json, card.md's JSON,
    # replaced (of the same model) or named as the card card.txt held (QA)
    txt = out.with_suffix(".txt")
    r = CliRunner().invoke(app, ["card", "--run", str(b), "--out", str(txt)])
    said = " ".join(r.output.split())
    assert r.exit_code == 0 and f"wrote {txt} and {txt}.json" in said, r.output
    assert json.loads(out.with_suffix(".json").read_text())["model_spec"] != "hf:other-model"
    assert json.loads(Path(f"{txt}.json").read_text())["model_spec"] == "hf:other-model"
    Path(f"{txt}.json").unlink()  # a card without its JSON: refused, not taken as no card
    r = CliRunner().invoke(app, ["card", "--run", str(b), "--out", str(txt)])
    said = " ".join(r.output.split())
    assert r.exit_code == 2 and "card.txt is a card without its card.txt.json" in said
    r = card("--run", str(b), "--overwrite")
    assert r.exit_code == 0, r.output
    assert json.loads(out.with_suffix(".json").read_text())["model_spec"] == "hf:other-model"
    # a file of the user's that is no card is not replaced either
    notes = tmp_path / "notes.md"
    notes.write_text("my notes", encoding="utf-8")
    r = CliRunner().invoke(app, ["card", "--run", str(a), "--out", str(notes)])
    assert r.exit_code == 2 and "exists and is not a contamscope card" in r.output
    assert notes.read_text(encoding="utf-8") == "my notes"


def test_card_update_keeps_the_developers_answers_and_says_what_it_drops(
    make_benbench_run, make_membership_run, tmp_path: Path
) -> None:
    """Writing a model's card again wiped the answers its developer had filled in (in the
    Markdown or the JSON) and dropped rows of runs not given again without a word (QA)."""
    from typer.testing import CliRunner

    from contamscope.cli.main import app
    from contamscope.report.card import DEVELOPER_FIELDS

    bb = make_benbench_run("bb")
    mem = make_membership_run("mem", shift=1.5, model="hf:/m/bb-model", fingerprint=None)
    out = tmp_path / "card.md"

    def card(*runs: Path, extra: tuple[str, ...] = ()) -> Any:
        args = [a for r in runs for a in ("--run", str(r))]
        return CliRunner().invoke(app, ["card", *args, "--out", str(out), *extra])

    assert card(bb, mem, extra=("--model-name", "My model")).exit_code == 0
    # the runs are named relative to the card (a card published with them keeps its links)
    first = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert {c["run"] for c in first["checks"] + first["other_checks"]} == {"bb", "mem"}
    assert str(tmp_path) not in out.read_text(encoding="utf-8")
    (first_key, first_q), (second_key, _) = DEVELOPER_FIELDS[0], DEVELOPER_FIELDS[1]
    text = out.read_text(encoding="utf-8")
    assert text.count("answer: _not stated_") == len(DEVELOPER_FIELDS)
    # the developer answers one question in the Markdown, another in the JSON
    at = text.index(f"- **{first_q}**")
    out.write_text(
        text[:at] + text[at:].replace("answer: _not stated_", "answer: no", 1), encoding="utf-8"
    )
    js = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    js["developer_fields"][second_key] = "pre-training, test split excluded"
    out.with_suffix(".json").write_text(json.dumps(js), encoding="utf-8")
    r = card(bb)
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())
    assert f"kept the developer's 2 answers from {out}" in said
    assert f"kept the model name 'My model' from {out}" in said  # not given again
    assert (
        "also had Membership test (against unseen references): bench_test.csv: not on the card now"
        in said
    )
    new = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert new["model"] == "My model"
    assert new["developer_fields"][first_key] == "no"
    assert new["developer_fields"][second_key] == "pre-training, test split excluded"
    assert not new["other_checks"]
    text = out.read_text(encoding="utf-8")
    assert "answer: pre-training, test split excluded" in text
    assert text.count("answer: _not stated_") == len(DEVELOPER_FIELDS) - 2
    # --overwrite starts a fresh card
    assert card(bb, extra=("--overwrite",)).exit_code == 0
    assert "answer: no\n" not in out.read_text(encoding="utf-8")


def test_card_numbers_are_over_the_paired_items_in_the_units_of_the_cli(
    make_benbench_run, tmp_path: Path
) -> None:
    """The card put the mean over all items beside a Delta over the paired ones (original >
    paraphrase next to a negative Delta), and wrote an accuracy difference as '%' (helper
    audit). Item 0 of the fixture has no usable paraphrase: 30 items, 29 paired."""
    from contamscope.report import build_card
    from contamscope.report.card import render_markdown

    run = make_benbench_run("paired")
    st = json.loads((run / "summary.json").read_text())["statistics"]["splits"]["test"]
    d = st["delta"]
    assert d["ppl"]["n"] == 29 and st["original"]["ppl"] != d["ppl"]["original"]
    card = build_card([run])
    text = render_markdown(card)
    row = next(ln for ln in text.splitlines() if ln.startswith("| /data/gsm8k_test.jsonl | test"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[3] == "30 (29)"
    assert cells[5] == f"{d['ppl']['original']:.3f} / {d['ppl']['reference']:.3f}"
    assert cells[6].startswith(f"{d['ppl']['delta']:+.3f} [")
    assert cells[7].startswith(f"{d['nll']['delta']:+.3f} [")  # the NLL Delta beside it
    acc = d["ngram_exact"]
    assert cells[8] == f"{100 * acc['original']:.1f}% / {100 * acc['reference']:.1f}%"
    assert cells[9].startswith(f"{100 * acc['delta']:+.1f} pp [")
    inst = st["instances"]["exact_all"]
    # "0/3 / 0/3" read as one fraction over another (QA)
    assert cells[10] == (
        f"{inst['count']} of 30 / {inst['reference_count']} of {inst['reference_of']}"
    )
    check = card["checks"][0]
    assert check["delta"]["ppl"]["original"] == d["ppl"]["original"]
    assert check["original_all_items"] == st["original"]
    tt = next(
        ln for ln in text.splitlines() if "| n-gram" in ln or "| 5-gram accuracy, exact" in ln
    )
    assert " pp [" in tt and "| 29 / 29 |" in tt
    # the card's p-values are counted as one family, alone and after Holm
    stats = json.loads((run / "summary.json").read_text())["statistics"]
    # the relative column of train - test: a difference of two percentages, in pp as the
    # terminal writes it (the card wrote %; QA)
    key = "ngram_exact"
    rel = stats["delta_train_test"][key]["relative_pct"]
    assert rel is not None and f"| {rel:+.2f} pp |" in tt, tt
    # NLL's too (shown, and recommended, but not counted before; QA)
    ps = [stats["splits"][sp]["delta"][m]["p_value"] for sp in ("test", "train")
          for m in ("ppl", "nll", "ngram_exact")]  # fmt: skip
    ps += [v["p_value"] for v in stats["delta_train_test"].values() if v["value"] is not None]
    ps.sort()
    raw = sum(p <= 0.05 for p in ps)
    holm = next((i for i, p in enumerate(ps) if p > 0.05 / (len(ps) - i)), len(ps))
    assert card["family"] == {
        "p_values": len(ps), "below_5pct": raw, "below_5pct_after_holm": holm, "copies": 0
    }  # fmt: skip
    assert f"{raw} of {len(ps)} are at most 0.05, {holm} after Holm's correction" in text


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda s: s["model"].pop("spec"), "no 'model' spec"),
        (lambda s: s.update(model="hf:x"), "no 'model' spec"),
        (lambda s: s["benchmark"].pop("test"), "not a complete BenBench summary.json (no 'test')"),
        (lambda s: s["benchmark"]["test"].pop("references"), "(no 'references')"),
        (lambda s: s["statistics"]["splits"]["test"].pop("instances"), "(no 'instances')"),
        (lambda s: s["statistics"]["splits"]["test"]["delta"].pop("ppl"), "(no 'ppl')"),
        (lambda s: s["statistics"].pop("splits"), "(no 'splits')"),
        (lambda s: s.update(statistics=None), "no 'statistics', not a finished benbench run"),
        (lambda s: s["statistics"].update(splits={}), "no split has statistics"),
        (lambda s: s.update(schema="contamscope.benbench.summary/99"), "schema 'contamscope"),
    ],
)
def test_a_damaged_summary_is_one_line_naming_the_run(
    make_benbench_run, tmp_path: Path, damage: Any, message: str
) -> None:
    """Eight damaged summaries raised KeyError/TypeError tracebacks; a run of no items and a
    newer schema were accepted (helper audit)."""
    from typer.testing import CliRunner

    from contamscope.cli.main import app

    run = make_benbench_run("damaged")
    s = json.loads((run / "summary.json").read_text())
    damage(s)
    (run / "summary.json").write_text(json.dumps(s))
    r = CliRunner().invoke(app, ["card", "--run", str(run), "--out", str(tmp_path / "c.md")])
    assert r.exit_code == 2, r.output
    assert message in r.output and "Traceback" not in r.output
    assert str(run) in r.output and not (tmp_path / "c.md").exists()


def test_card_tells_models_by_fingerprint_and_refuses_a_split_checked_twice(
    make_benbench_run, tmp_path: Path
) -> None:
    """One spec in two dtypes made one card of two sets of numbers; a copied run folder made
    two identical rows (helper audit)."""
    import shutil

    from contamscope.errors import ConfigError
    from contamscope.report import build_card

    a = make_benbench_run("a")
    b = make_benbench_run("b")
    s = json.loads((b / "summary.json").read_text())
    s["model"]["fingerprint"] = "hf:/m/bb-model|dtype=bfloat16"
    (b / "summary.json").write_text(json.dumps(s))
    with pytest.raises(ConfigError, match=r"the runs are of 2 models \(hf:/m/bb-model \("):
        build_card([a, b])
    shutil.copytree(a, tmp_path / "copy")
    with pytest.raises(ConfigError, match=r"both check the test split of /data/gsm8k_test"):
        build_card([a, tmp_path / "copy"])
    assert len(build_card([a, a / "summary.json", str(a)])["checks"]) == 3  # test, train, t-t


def test_a_model_keeps_its_colour_in_every_leaderboard_chart(
    make_run, make_cap_run, make_benbench_run
) -> None:
    """Each chart coloured its own models from the first colour on: the BenBench run's model
    was blue in its chart while blue meant another model in the chart beside it."""
    from contamscope.report.leaderboard import _bar_chart
    from contamscope.report.plots import OKABE_ITO

    runs = [make_run("perm", n_items=24), make_cap_run("cap"), make_benbench_run("bb")]
    entries = collect(runs)
    models = list(dict.fromkeys(e.model for e in entries))
    assert len(models) == 3
    for e in entries:
        svg = _bar_chart(entries, e.method).lower()
        own = OKABE_ITO[models.index(e.model)].lower()
        assert f"fill: {own}" in svg, (e.model, e.method)


def test_card_takes_every_method_of_one_model_and_names_what_it_cannot_take(
    make_run, make_benbench_run, make_membership_run, tmp_path: Path
) -> None:
    """BenBench rows and, for runs of the other methods, their leaderboard estimates; the
    family of p-values counts them all (a permutation run was refused as 'not a BenBench
    run')."""
    from typer.testing import CliRunner

    from contamscope.cli.main import app
    from contamscope.report.card import build_card, render_markdown
    from contamscope.report.membership import estimate
    from contamscope.report.rundata import load_run

    bb = make_benbench_run("bb")
    mem = make_membership_run("mem", shift=1.5, model="hf:/m/bb-model", fingerprint=None)
    card = build_card([bb, mem])
    assert card["method"].startswith("BenBench") and "; Membership test" in card["method"]
    (row,) = card["other_checks"]
    est = estimate(load_run(mem))
    assert est is not None
    assert (row["value"], row["p_value"], row["n_items"]) == (est.value, est.p_value, 30)
    assert row["text"] == est.text() and row["benchmark"] == "bench_test.csv"
    bb_ps = build_card([bb])["family"]["p_values"]
    assert card["family"]["p_values"] == bb_ps + 1
    # a copy of a run is one measurement counted twice: said, as the leaderboard says it
    # (upgrade QA)
    assert not any("hold the same item records" in n for n in card["notes"])
    import shutil

    copy = shutil.copytree(mem, mem.parent / "mem-copy")
    twice = build_card([bb, mem, copy])
    # one measurement, one test in Holm's count, and the sentence on the count says so (it
    # counted 2 of the 3 p-values shown without a word; diff-review QA)
    assert twice["family"] == {**card["family"], "copies": 1}
    assert "Every p-value above is its own test (copies of one run counted once: see the " in (
        " ".join(render_markdown(twice).split())
    )
    assert (
        f"{mem} and {copy} hold the same item records (copies of one run?): one measurement, "
        "shown as 2 rows and counted as 1 test in Holm's correction"
    ) in " ".join(twice["notes"])
    text = render_markdown(card)
    assert "## Benchmarks checked" in text and "## Other detection methods" in text
    # a card of other methods' runs alone: nothing they are "other" than (QA)
    alone = render_markdown(build_card([mem]))
    assert "## Detection methods" in alone and "Other detection" not in alone
    assert f"| {est.text()} |" in text and "Mann-Whitney" in text
    assert not any("references are not written" in n for n in card["notes"])
    summary = json.loads((mem / "summary.json").read_text())
    row_unlike = {"feature": "natural option order", "p_value": 1e-9}
    summary["reference_check"] = {"alike": False, "level": 0.01, "rows": [row_unlike]}
    (mem / "summary.json").write_text(json.dumps(summary))
    assert any("references are not written" in n for n in build_card([mem])["notes"])
    # another method's runs alone: no BenBench table, the rows only
    alone = render_markdown(build_card([mem]))
    assert "## Benchmarks checked" not in alone and "Membership test" in alone
    # ... and the caveat that absence is no proof (it came with BenBench rows only; QA)
    assert "nor is their absence proof of a clean model" in alone
    # a run without an estimate: no empty "()" for the methods measured (QA)
    s = json.loads((mem / "summary.json").read_text())
    s["statistics"]["dataset_test"]["auc"] = None
    (mem / "summary.json").write_text(json.dumps(s))
    empty = build_card([mem])
    assert not empty["other_checks"] and empty["notes"]
    assert "Signals measured by contamscope: none with an estimate" in render_markdown(empty)
    # runs of another model, and files of no method the card takes: one line each
    perm = make_run("perm", n_items=6)  # the synthetic permutation runs' own model
    res = CliRunner().invoke(
        app, ["card", "--run", str(perm), "--run", str(mem), "--out", str(tmp_path / "c.md")]
    )
    assert res.exit_code == 2 and "the runs are of 2 models" in res.output
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "summary.json").write_text('{"schema": "other.tool/1"}')
    res = CliRunner().invoke(
        app, ["card", "--run", str(tmp_path / "x"), "--out", str(tmp_path / "c.md")]
    )
    assert res.exit_code == 2
    assert "no run summary of contamscope; the card takes benbench, permutation" in res.output


def test_a_run_without_any_ngram_hit_gets_no_cell(make_benbench_run) -> None:
    """0% exact n-gram accuracy on originals and paraphrases made the cell '+0.0 pp [+0.0,
    +0.0]', p = 1: a precise-looking 'no leak' that measured nothing (sweep audit)."""
    from contamscope.report.leaderboard import LeftOut

    run = make_benbench_run("zero")
    s = json.loads((run / "summary.json").read_text())
    d = s["statistics"]["splits"]["test"]["delta"]["ngram_exact"]
    d.update(original=0.0, reference=0.0, delta=0.0, ci=[0.0, 0.0], p_value=1.0)
    (run / "summary.json").write_text(json.dumps(s))
    assert estimate(load_run(run)) is None
    from contamscope.report.benbench import verdict_line

    kind, sentence = verdict_line(json.loads((run / "summary.json").read_text()))  # type: ignore[misc]
    assert kind == "inconclusive" and sentence.startswith("inconclusive on test")
    other = make_benbench_run("other")
    left: list[LeftOut] = []
    entries = collect([run, other], left)
    assert [e.run_dir.name for e in entries] == ["other"]
    assert "run, inconclusive: no n-gram was predicted right on the originals nor" in left[0].reason


def test_card_reads_a_summary_without_its_schema_as_report_does(
    make_benbench_run, tmp_path: Path
) -> None:
    """A BenBench summary.json without its ``schema`` key (report, leaderboard and compare
    read it) gives the card of the whole summary; one of another schema version is refused."""
    from typer.testing import CliRunner

    from contamscope.cli.main import app

    a = make_benbench_run("a")
    runner = CliRunner()
    r = runner.invoke(app, ["card", "--run", str(a), "--out", str(tmp_path / "with.md")])
    assert r.exit_code == 0, r.output
    s = json.loads((a / "summary.json").read_text())
    del s["schema"]
    (a / "summary.json").write_text(json.dumps(s))
    r = runner.invoke(app, ["card", "--run", str(a), "--out", str(tmp_path / "without.md")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "without.md").read_text() == (tmp_path / "with.md").read_text()
    s["schema"] = "contamscope.benbench.summary/0"
    (a / "summary.json").write_text(json.dumps(s))
    r = runner.invoke(app, ["card", "--run", str(a), "--out", str(tmp_path / "old.md")])
    assert r.exit_code == 2 and "schema 'contamscope.benbench.summary/0'" in r.output


def _no_hits(run: Path) -> None:
    """No n-gram predicted right on either split, originals nor paraphrases: each item's
    accuracies 0, and the summary's Deltas (and Delta_train - Delta_test) of them 0 in [0, 0]."""
    lines = []
    for line in (run / "items.jsonl").read_text().splitlines():
        r = json.loads(line)
        for part in (r.get("metrics") or {}).values():
            for k in ("ngram_exact", "ngram_rouge", "ngram_edit"):
                if isinstance(part, dict) and part.get(k) is not None:
                    part[k] = 0.0
        lines.append(json.dumps(r))
    (run / "items.jsonl").write_text("\n".join(lines) + "\n")
    s = json.loads((run / "summary.json").read_text())
    for st in s["statistics"]["splits"].values():
        for k in ("ngram_exact", "ngram_rouge", "ngram_edit"):
            st["delta"][k].update(
                original=0.0, reference=0.0, delta=0.0, ci=[0.0, 0.0], p_value=1.0
            )
    for k in ("ngram_exact", "ngram_rouge", "ngram_edit"):
        s["statistics"]["delta_train_test"][k].update(value=0.0, ci=[0.0, 0.0], p_value=1.0)
    (run / "summary.json").write_text(json.dumps(s))


def test_card_marks_a_delta_of_no_ngram_hit_inconclusive_and_leaves_it_untested(
    make_benbench_run, tmp_path: Path
) -> None:
    """The card showed such a Delta as 'Delta acc +0.0 pp [+0.0, +0.0], p 1.000' and counted
    its p (and the train - test ones) in the Holm family, while the report and the board call
    the run inconclusive (HTML QA)."""
    from contamscope.report.card import build_card, render_markdown

    run = make_benbench_run("zero")
    before = build_card([run])["family"]["p_values"]
    _no_hits(run)
    card = build_card([run])
    test = next(c for c in card["checks"] if c["split"] == "test")
    assert "no n-gram was predicted right" in test["delta"]["ngram_exact"]["inconclusive"]
    assert "inconclusive" not in test["delta"]["ppl"]
    tt = next(c for c in card["checks"] if "delta_train_test" in c)["delta_train_test"]
    assert all("inconclusive" in tt[k] for k in ("ngram_exact", "ngram_rouge", "ngram_edit"))
    assert "inconclusive" not in tt["nll"]
    # out of the family: test and train exact accuracy, and the three train - test n-gram ones
    assert card["family"]["p_values"] == before - 5
    text = render_markdown(card)
    assert "+0.0 pp [+0.0, +0.0]" not in text
    assert text.count("inconclusive (no n-gram predicted right)") == 2 + 3  # 2 splits, 3 t - t
    assert sum("Delta of exact n-gram accuracy inconclusive" in n for n in card["notes"]) == 2
    assert any(str(run) in n for n in card["notes"])


def test_accuracy_bars_of_no_hit_start_at_zero(make_benbench_run) -> None:
    """All-zero accuracy bars drew a y axis from -0.04 to 0.04 (%): it starts at 0 (HTML QA)."""
    run = make_benbench_run("zero", n_per_split=6)
    _no_hits(run)
    page = build_report(run).read_text(encoding="utf-8")
    title = "n-gram accuracy of originals and paraphrases per split"
    fig = page[page.index(f"<title>{title}</title>") :]
    fig = fig[: fig.index("</svg>")]
    ticks = [html.unescape(t) for t in re.findall(r">\s*([−\-]?[0-9.]+)\s*</text>", fig)]
    values = [float(t.replace("−", "-")) for t in ticks]
    assert values and min(values) == 0 and max(values) == 100, ticks


def test_without_an_interval_the_exact_p_value_alone_signals() -> None:
    from contamscope.report.benbench import _signal

    few = {"n": 4, "delta": 0.3, "ci": None, "ci_note": "fewer than 5 items", "p_value": 0.01}
    assert _signal(few, "ngram_exact") and not _signal(dict(few, p_value=0.2), "ngram_exact")
    # a run from before intervals were withheld (no note, no interval) never signalled on p
    assert not _signal({"n": 1, "ci": None, "p_value": 0.01}, "ngram_exact")
    with_ci = {"n": 9, "ci": [-0.01, 0.4], "p_value": 0.01}
    assert not _signal(with_ci, "ngram_exact") and _signal(
        dict(with_ci, ci=[0.1, 0.4]), "ngram_exact"
    )


def test_no_verdict_says_the_paraphrases_failed_where_they_did() -> None:
    """A split whose paraphrases were all refused by the checks was told to give the
    paraphrases with --reference, to a user who had (QA); without any, it still is."""
    from contamscope.report.benbench import verdict_line

    def summary(failures: dict[str, int]) -> dict[str, Any]:
        counts = {"items_selected": 2, "items_analysed": 2, "paraphrase_failures": failures}
        return {"statistics": {"splits": {"test": {"delta": {}}}}, "counts": {"test": counts}}

    kind, line = verdict_line(summary({"final answer changed": 2})) or ("", "")
    assert kind == "none"
    assert line == (
        "no verdict: no item of the test split has a usable paraphrase: 2 paraphrases failed "
        "the checks (summary.json's paraphrase_failures; rows paired with the wrong items "
        "change the final answers)"
    )
    kind, line = verdict_line(summary({})) or ("", "")
    assert kind == "none" and "(give the paraphrases with --reference" in line
