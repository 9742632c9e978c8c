"""Tests for the detection of options that refer to other options."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from contamscope.perturb.exchangeability import non_exchangeable_reason

BENCHDATA = Path(__file__).resolve().parents[2].parent / "shared" / "benchdata"
MMLU_TEST = BENCHDATA / "mmlu" / "test"


def _opts(last: str, *, first: tuple[str, ...] = ("Paris", "Rome", "Berlin")) -> list[str]:
    return [*first, last]


def test_reason_format_names_option_and_text() -> None:
    assert non_exchangeable_reason(_opts("All of the above")) == (
        "option D refers to other options: 'All of the above'"
    )
    assert non_exchangeable_reason(["None of these", "x", "y", "z"]) == (
        "option A refers to other options: 'None of these'"
    )


def test_numbered_statement_options_are_read_in_linear_time() -> None:
    """The numbered-statements rule had nested quantifiers: an option "IIII...a" of 30 letters
    took 40 s, each letter more doubling it (security QA). Each numeral ends at a bracket or a
    word's end now; the usual forms still read as combinations."""
    from contamscope.perturb.exchangeability import natural_order_reason

    assert natural_order_reason(["I" * 5_000 + "a", "II only", "III only", "I and II"]) is None
    # trailing spaces had two places to go (quadratic: 64,000 took 16 s), and the statement
    # labels' separators every way (exponential: "①  ②  ..." of 49 characters, over 5 s)
    from contamscope.perturb.exchangeability import _LABEL_SEQUENCE, _ROMAN_COMBO

    assert _ROMAN_COMBO.match("I" + " " * 300_000 + "x") is None
    assert _LABEL_SEQUENCE.fullmatch("①  " * 5_000 + "x") is None
    assert natural_order_reason(["①  " * 5_000 + "x", "①②", "②③", "③④"]) is None
    assert natural_order_reason(["①  ②", "①③", "②  ③", "③④"]) == (
        "combinations of numbered statements"
    )
    combos = ["I and II", "(i), (iii) only", "II & III", "I, III, and IV"]
    assert natural_order_reason(combos) == "combinations of numbered statements"


@pytest.mark.parametrize(
    "option",
    [
        "All of the above",
        "all of the above.",
        "None of the above",
        "none of above.",
        "All the above",
        "Any of the above",
        "Both of the above",
        "All of the above are correct.",
        "Moons contribute to all of the above.",
        "None of the foregoing",
        "All of these",
        "None of these",
        "All of these options.",
        "Both of these",
        "Neither of these.",
        "All of them",
        "All of the options given are correct",
        "None of the options given is correct",
        "Both",
        "Neither",
        "Either.",
        "Other",
    ],
)
def test_english_phrases_flagged(option: str) -> None:
    assert non_exchangeable_reason(_opts(option)) is not None


@pytest.mark.parametrize(
    "option",
    [
        "A and B",
        "A and B only",
        "Both A and B",
        "both A and B.",
        "Both (a) and (b)",
        "both a and b",
        "Neither A nor B",
        "neither (a) nor (b)",
        "Either A or B",
        "A or B",
        "A, B and C",
        "A, B, and C",
        "A B and C",
        "(A), (B), and (C) are part of the theory",
        "(B) (C) and (D).",
        "Both A & C",
        "Options A and B",
        "A and C are correct",
        "a and b",
    ],
)
def test_label_combinations_flagged(option: str) -> None:
    assert non_exchangeable_reason(_opts(option)) is not None


@pytest.mark.parametrize(
    "option",
    [
        "以上都对",
        "以上都是",
        "以上都不是",
        "以上均正确",
        "以上皆非",
        "以上全部",
        "以上所有",
        "以上说法都不对",
        "以上答案都不正确",
        "以上三项都是",
        "上述都不正确",
        "其他选项均可",
        "其他三个都不对",
        "都不对",
        "全部正确",
        "均正确",
        "A和B",
        "A和B都对",
        "B和C都对",
        "A、B",
        "A、B、C都不对",
        "A，B和C均对",
        "AB都对",
        "ABC均正确",
        "选项A和C",
        "A+C+D",
        "a和b都对",
        # full-width letters and signs, traditional characters: scored as exchangeable (QA)
        "Ａ和Ｂ",
        "A＋B",
        "ＡＢ都对",
        "以上說法都對",
        "其他選項均可",
    ],
)
def test_chinese_phrases_flagged(option: str) -> None:
    assert non_exchangeable_reason(["甲", "乙", "丙", option]) is not None


def test_a_reference_is_said_as_written() -> None:
    """The rules read the options folded (NFKC); the reason quotes the option's own text."""
    assert non_exchangeable_reason(["甲", "乙", "丙", "Ａ，Ｂ都对"]) == (
        "option D refers to other options: 'Ａ，Ｂ'"
    )


@pytest.mark.parametrize(
    "options",
    [
        # letters naming things, not options
        ["Vitamin A", "Vitamin B and C", "Iron", "Zinc"],
        ["Hepatitis B and C", "Hepatitis A", "HIV", "HPV"],
        ["Type A and B personalities", "Type C", "Type D", "None"],
        ["Plan A or B", "Plan C", "Plan D", "No plan"],
        ["Group A and B streptococci", "Staphylococci", "Enterococci", "Clostridia"],
        ["A and B antigens", "Rh factor", "Antibodies", "Platelets"],
        ["anti-A and B", "anti-D", "anti-Kell", "anti-Duffy"],
        ["P(A and B) = P(A) · P(B)", "A and B may or may not be mutually exclusive.", "x", "y"],
        ["P(C | A, B) * P(A) * P(B)", "P(A, B | C) * P(C)", "P(A) P(B)", "P(C)"],
        [
            "A is a better athlete.",
            "B is a better athlete.",
            "Neither is",
            "A and B are equally good.",
        ],
        ["A and C", "B6 and B12", "B6 and D", "B12 and E"],
        ["a+b", "a*b", "a/b", "a-b"],
        ["A", "B", "A B", "B A"],
        # ordinary text that merely contains the words
        ["It will be located above the equilibrium price.", "below", "at", "on"],
        ["pH of the muscle falls below 6.0.", "x", "y", "z"],
        ["Older adults cannot do either of these", "x", "y", "z"],
        ["No, neither of them can testify", "Yes", "Only the wife", "Only the husband"],
        ["They have complete information about all alternatives", "x", "y", "z"],
        ["None", "One", "Two", "Three"],
        ["Both SRAM and DRAM", "SRAM", "DRAM", "Flash"],
        ["neither younger nor older.", "younger", "older", "same"],
        ["Vitamin A", "Vitamin C", "Vitamin D", "Vitamin E"],
        ["T and B cells", "NK cells", "Macrophages", "Neutrophils"],
        ["Invalid. Counterexample when E, F, and G are true", "Valid", "x", "y"],
        # Chinese: numbers "above", letters naming things
        ["60岁以上", "县级以上人民政府", "1个月以上", "0.4以上"],
        ["维生素A和B", "维生素C", "维生素D", "铁"],
        ["A与B互斥", "A与B独立", "A包含B", "B包含A"],
        ["|A|=|B|", "A，B都和同一对角矩阵相似", "A，B都有相同的特征向量", "A=B"],
        ["a和b均带正电", "a和b均带负电", "a带负电，b带正电", "a带正电，b带负电"],
        ["若 $A B=\\varnothing$，则 $A， B$ 一定相互独立", "x", "y", "z"],
        ["腹部B超", "B细胞", "维生素A、B、C缺乏", "G蛋白"],
        ["成都", "均田制", "平均数", "全叶均匀生长"],
    ],
)
def test_true_negatives(options: list[str]) -> None:
    assert non_exchangeable_reason(options) is None


def test_labels_beyond_the_item_are_not_references() -> None:
    # E and F do not exist in a 4-option item
    assert non_exchangeable_reason(_opts("E and F")) is None
    assert non_exchangeable_reason(["p", "q", "r", "s", "t", "E and F"]) is not None


def test_single_label_is_not_a_reference() -> None:
    assert non_exchangeable_reason(_opts("Same as B")) is None


# --------------------------------------------------------------------------- real MMLU


def _read_mmlu() -> list[tuple[str, list[str]]]:
    rows = []
    for path in sorted(MMLU_TEST.glob("*.csv")):
        with path.open(newline="", encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                rows.append((r["question"], [r[f"choice{i}"] for i in range(4)]))
    return rows


@pytest.mark.skipif(not MMLU_TEST.is_dir(), reason=f"MMLU test set not found at {MMLU_TEST}")
def test_mmlu_excluded_fraction_and_known_examples() -> None:
    rows = _read_mmlu()
    assert len(rows) > 14_000
    flagged = [non_exchangeable_reason(opts) for _, opts in rows]
    frac = sum(r is not None for r in flagged) / len(rows)
    print(f"MMLU test: {frac:.2%} of {len(rows)} items have non-exchangeable options")
    assert 0.02 < frac < 0.08

    def reason(prefix: str) -> str | None:
        hits = [r for (q, _), r in zip(rows, flagged, strict=True) if q.startswith(prefix)]
        assert hits, f"no MMLU question starts with {prefix!r}"
        return hits[0]

    # known references caught
    assert reason("Which of the following countries has sent landers to Venus?") == (
        "option D refers to other options: 'A and B'"
    )
    assert reason("Cattle breeders have improved the quality of meat") is not None  # 'A and B'
    assert reason("Another term for sexual self-stimulation is") is not None  # 'a and b'
    assert reason("Kirkwood gaps are observed") is not None  # 'A and B'
    # every option saying "... of the above" is caught
    above = [
        i for i, (_, opts) in enumerate(rows) if any("of the above" in o.lower() for o in opts)
    ]
    assert len(above) > 300
    assert all(flagged[i] is not None for i in above)
    # known true negatives: "Both SRAM and DRAM" names no option; "None" as a count
    assert reason("Which of the following memories uses one transistor") is None
    assert reason("How many real roots does the polynomial 2x^5 + 8x - 7 have?") is None


def test_nested_options_are_a_natural_order_and_counted_on_mmlu() -> None:
    """anatomy-103 ("The ribs / The ribs and sternum / ...") and anatomy-10 ("hard palate. /
    hard palate and upper lip. / ...") list options that each add to the one before; a clean
    SmolLM2 put both first, and an 8-item anatomy sample read "leakage signal" (journey audit)."""
    from contamscope.data import load_benchmark
    from contamscope.perturb.exchangeability import natural_order_reason

    rows = [(it.question, list(it.options)) for it in load_benchmark("mmlu").items]  # bundled
    nested = [
        (q, opts) for q, opts in rows
        if non_exchangeable_reason(opts) is None
        and (natural_order_reason(opts) or "").startswith("nested options")
    ]  # fmt: skip
    assert len(nested) == 14  # the count the rule's docstring gives
    assert any(opts[0] == "The ribs" for _, opts in nested)
    assert any(opts[0] == "hard palate." for _, opts in nested)
    # options that only share words are no chain; a shuffled chain is none either
    assert natural_order_reason(["red wine", "white wine", "rose wine", "wine"]) is None
    assert natural_order_reason(["a b", "a", "a b c", "a b c d"]) is None
    assert natural_order_reason(["二价体", "二价体和单价体", "三价体、二价体和单价体"]) == (
        "nested options (each adds to the one before)"
    )


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        # CMB: a clean SmolLM2 ranked this published order 10th of 120 (gap +5.8 nats)
        (["I类", "Ⅱ类", "Ⅲ类", "Ⅳ类", "Ⅴ类"], "numbers in increasing order"),
        (["Lamina I.", "Lamina II.", "Lamina V.", "Lamina IX"], "numbers in increasing order"),
        (["Stage IV", "Stage III", "Stage II", "Stage I"], "numbers in decreasing order"),
        (["Every 4 hours.", "Every 8 hours.", "Every 12 hours.", "Every 16 hours."], "numbers in increasing order"),
        (["x^2 + y^2 = 1", "x^2 + y^2 = 2", "x^2 + y^2 = 9", "x^2 + y^2 = 16"], "numbers in increasing order"),
        (["第11肋", "第10肋", "第8肋", "第6肋"], "numbers in decreasing order"),
        (["第二十届", "第二十二届", "第二十四届", "第二十六届"], "numbers in increasing order"),
        (["一个", "两个", "三个", "四个"], "numbers in increasing order"),
        (["医生甲", "医生乙", "医生丙", "医生丁"], "numbers in increasing order"),
        (["①风寒侵袭", "②肾亏骼空", "③痰浊凝聚", "④痰毒内蕴"], "numbers in increasing order"),
        # a minus sign counts (it was dropped before a bare number: -5 read as 5)
        (["-5", "-3", "0", "2"], "numbers in increasing order"),
        (["−2.5 V", "−1 V", "+1 V", "+2.5 V"], "numbers in increasing order"),
    ],
)  # fmt: skip
def test_natural_orders_of_numbered_options(options: list[str], reason: str) -> None:
    from contamscope.perturb.exchangeability import natural_order_reason

    assert natural_order_reason(options) == reason
    assert natural_order_reason([options[1], options[0], *options[2:]]) is None  # unsorted


@pytest.mark.parametrize(
    "options",
    [
        ["0.1", "0.2", "0.05", "0.08"],  # a shared "0." is no opening: 0.1, 0.2, 0.05, 0.08
        ["24%", "23%", "-21%", "2%"],
        ["six", "sixty", "five", "fifty"],  # a shared "six" is part of the number words
        ["Iron", "Vanadium", "Xenon", "Zinc"],  # initials are no Roman numerals
        ["B12 icosahedra", "B8 cubes", "B6 octahedra", "B4 tetrahedra"],  # names, not numbers
        ["I think so", "V", "X", "Iodine"],
        ["甲状腺", "肾上腺", "垂体", "胰岛"],  # one stem as a first character is no label
    ],
)
def test_not_natural_orders(options: list[str]) -> None:
    from contamscope.perturb.exchangeability import natural_order_reason

    assert natural_order_reason(options) is None


def test_numbered_natural_orders_on_bundled_mmlu() -> None:
    """The bundled MMLU test set (no ../shared needed): Roman numerals and shared openings."""
    from contamscope.data import load_benchmark
    from contamscope.perturb.exchangeability import natural_order_reason

    items = load_benchmark("mmlu").items
    found = {tuple(it.options): natural_order_reason(it.options) for it in items}
    assert found[("Quadrant I", "Quadrant II", "Quadrant III", "Quadrant IV")] == (
        "numbers in increasing order"
    )
    assert found[("Louis XIII", "Louis XIV", "Louis XV", "Louis XVI")] == (
        "numbers in increasing order"
    )
    numbers = [it for it in items if (natural_order_reason(it.options) or "").startswith("numbers")]
    assert len(numbers) == 851  # the count the rule's docstring gives
    # ordinals and months count too (13 of them: amendments, centuries, "First / Second ...")
    assert found[
        (
            "Sixteenth-century Spain",
            "Seventeenth-century Netherlands",
            "Eighteenth-century France",
            "Nineteenth-century Prussia",
        )
    ] == ("numbers in increasing order")
    assert found[("January.", "March.", "May.", "July.")] == "numbers in increasing order"


@pytest.mark.parametrize(
    ("options", "natural"),
    [
        (["Sunday", "Monday", "Tuesday", "Wednesday"], True),  # a cycle from any start
        (["Friday", "Thursday", "Wednesday", "Tuesday"], True),  # backwards
        (["November", "December", "January", "February"], True),  # not sorted as numbers
        (["秋分日", "冬至日", "春分日", "夏至日"], True),
        (["the winter solstice", "the spring equinox", "the summer solstice", "the autumn equinox"], True),
        (["Monday", "Wednesday", "Tuesday", "Thursday"], False),
        (["春季", "秋季", "夏季", "冬季"], False),  # CMMLU's order of them
        (["Springs", "Summer", "Fall", "Winter"], False),  # "Springs" is no season
        (["Spring", "Summer", "Paris", "Winter"], False),
        (["Monday", "Tuesday"], False),  # two options: any order is a cycle
    ],
)  # fmt: skip
def test_cycles_in_order(options: list[str], natural: bool) -> None:
    from contamscope.perturb.exchangeability import conventions_of, natural_order_reason

    reason = natural_order_reason(options)
    assert (reason == "a cycle in order (weekdays, months or seasons)") == natural
    if natural:  # the convention that the permutation summary counts, too
        assert tuple(range(len(options))) in conventions_of(options)["a cycle in order"]


def test_cycles_on_the_benchmarks(benchdata: Path) -> None:
    """The counts rule 6 of natural_order_reason gives: MMLU's weekdays and months all in
    cycle order, C-Eval's seasons 4 of 5, CMMLU's (shuffled options) none of 5."""
    from contamscope.data import load_benchmark
    from contamscope.perturb.exchangeability import cycle_orders

    for name, cycled, total in (
        ("mmlu/test", 9, 9),
        ("ceval-exam/test", 4, 5),
        ("cmmlu/test", 0, 5),
    ):
        items = load_benchmark(str(benchdata / name)).items
        found = [(it.options, cycle_orders(it.options)) for it in items]
        found = [(o, c) for o, c in found if c]
        assert len(found) == total, name
        assert sum(tuple(range(len(o))) in c for o, c in found) == cycled, name


def test_two_by_two_blocks_listed_row_by_row() -> None:
    from contamscope.perturb.exchangeability import block_orders, natural_order_reason

    block = [
        "acute lymphocytic leukemia",
        "acute myelogenous leukemia",
        "chronic lymphocytic leukemia",
        "chronic myelogenous leukemia",
    ]
    orders = block_orders(block)
    assert orders is not None and len(orders) == 8  # either factor first, either level first
    assert (0, 1, 2, 3) in orders and (0, 2, 1, 3) in orders and (0, 3, 1, 2) not in orders
    assert natural_order_reason(block) == "a 2 x 2 block listed row by row"
    mixed = [block[0], block[3], block[1], block[2]]  # diagonal first: not row by row
    assert natural_order_reason(mixed) is None
    assert block_orders(mixed) is not None
    assert natural_order_reason(
        ["低温长日作物", "低温短日作物", "高温长日作物", "高温短日作物"]
    ) == ("a 2 x 2 block listed row by row")
    assert natural_order_reason(["300 J into the system", "600 J into the system",
                                 "300 J out of the system", "600 J out of the system"]) == (
        "a 2 x 2 block listed row by row"
    )  # fmt: skip
    # options that share words without crossing two choices are no block
    assert block_orders(["red wine", "white wine", "red grapes", "green tea"]) is None
    assert block_orders(["Paris", "London", "Rome", "Berlin"]) is None
    assert block_orders(["a", "b", "c"]) is None


def test_label_combinations_in_dictionary_order() -> None:
    """C-Eval's politics and history items combine circled statements: 112 of its 290 such
    items list them in dictionary order (a clean SmolLM2 put one such published order first)."""
    from contamscope.perturb.exchangeability import natural_order_reason

    assert natural_order_reason(["①②", "①④", "②③", "③④"]) == "combinations of numbered statements"
    assert natural_order_reason(["①、②", "①、③", "②、④", "③、④"]) == (
        "combinations of numbered statements"
    )
    assert (
        natural_order_reason(["甲乙", "甲丙", "乙丁", "丙丁"])
        == "combinations of numbered statements"
    )
    assert natural_order_reason(["③④", "①②", "②③", "①④"]) is None  # not in order
    assert natural_order_reason(["①②", "①④", "②③", "全部"]) is None  # not all labels


@pytest.mark.skipif(not MMLU_TEST.is_dir(), reason=f"MMLU test set not found at {MMLU_TEST}")
def test_repeated_options_are_left_out_with_their_reason() -> None:
    """An item with two identical options scored 24 orders of 12 texts: the original's rank was
    tied by construction, Algorithm 1 could never flag it, and it was counted in the rates
    unnamed (MMLU holds 9 such items, e.g. public_relations-85's 'manipulative' twice)."""
    assert non_exchangeable_reason(["proactive", "reactive", "manipulative", "manipulative"]) == (
        "option D repeats option C ('manipulative'): orders that swap them are one text"
    )
    assert non_exchangeable_reason(["1/16 ", "3/16", "1/16", "1/8"]) == (  # CMMLU genetics-36
        "option C repeats option A ('1/16'): orders that swap them are one text"
    )
    rows = _read_mmlu()
    repeats = [r for _, opts in rows if (r := non_exchangeable_reason(opts)) and "repeats" in r]
    assert len(repeats) == 9


def test_mathematical_capitals_are_not_folded_into_labels() -> None:
    """NFKC read 𝐀 and 𝐁 (bold matrices) as the labels A and B (diff-review QA); only the
    full-width block folds."""
    assert non_exchangeable_reason(["𝐀 and 𝐁", "𝐁 and 𝐂", "𝐀 and 𝐂", "𝐀, 𝐁 and 𝐂"]) is None
