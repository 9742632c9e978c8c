import math
from pathlib import Path

import pytest

from contamscope.data.items import MCQItem
from contamscope.errors import ConfigError
from contamscope.perturb import TEMPLATES, PromptTemplate, apply_order, get_template, option_orders


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_exhaustive_orders_are_all_distinct_permutations_identity_first(n: int) -> None:
    s = option_orders(n)
    assert s.exhaustive
    assert len(s.orders) == math.factorial(n) == len(set(s.orders))
    assert s.orders[0] == tuple(range(n))
    assert all(sorted(o) == list(range(n)) for o in s.orders)


def test_monte_carlo_orders_are_seeded_distinct_and_exclude_identity_after_first() -> None:
    a = option_orders(8, max_exhaustive=6, mc_orders=50, seed=1, key="q7")
    b = option_orders(8, max_exhaustive=6, mc_orders=50, seed=1, key="q7")
    c = option_orders(8, max_exhaustive=6, mc_orders=50, seed=2, key="q7")
    d = option_orders(8, max_exhaustive=6, mc_orders=50, seed=1, key="q8")
    assert not a.exhaustive and len(a.orders) == 51
    assert a.orders == b.orders
    assert a.orders != c.orders and a.orders != d.orders
    assert a.orders[0] == tuple(range(8)) and tuple(range(8)) not in a.orders[1:]
    assert len(set(a.orders)) == 51


def test_monte_carlo_sample_is_capped_at_all_other_orders() -> None:
    s = option_orders(4, max_exhaustive=3, mc_orders=1000)
    assert len(s.orders) == 24 and len(set(s.orders)) == 24


def test_templates_render_prefix_and_relabelled_continuation() -> None:
    item = MCQItem(id="x", question="Which is red?", options=("sky", "blood", "grass"))
    t = TEMPLATES["paper"]
    assert t.prefix(item) == "Which is red?:\n"
    assert t.continuation(item, (0, 1, 2)) == "A:sky\nB:blood\nC:grass\n"
    assert t.continuation(item, (2, 0, 1)) == "A:grass\nB:sky\nC:blood\n"
    m = get_template("mmlu")
    assert (
        m.prefix(item) + m.continuation(item, (1, 0, 2))
        == "Which is red?\nA. blood\nB. sky\nC. grass\n"
    )
    assert apply_order(("a", "b", "c"), (2, 1, 0)) == ("c", "b", "a")


def test_template_errors_name_the_option() -> None:
    with pytest.raises(ConfigError, match="--template 'nope'"):
        get_template("nope")
    with pytest.raises(ConfigError, match="question"):
        PromptTemplate("bad", question="no placeholder")


def test_paper_script_keeps_the_published_scripts_newline_and_space_after_the_third_line() -> None:
    """The published script's layout: a newline before the question and a space after the
    third option line, whichever option stands there (it moves orders' log-probs unevenly, so
    it is not the same in every order: QA). ``paper`` drops both."""
    item = MCQItem(id="x", question="Which is red?", options=("sky", "blood", "grass", "sea", "x"))
    t = get_template("paper-script")
    assert t.prefix(item) == "\nWhich is red?:\n"
    assert t.continuation(item, (0, 1, 2, 3)) == "A:sky\nB:blood\nC:grass \nD:sea\n"
    assert t.continuation(item, (3, 2, 0, 1)) == "A:sea\nB:grass\nC:sky \nD:blood\n"
    assert t.continuation(item, (0, 1, 2, 3, 4)).endswith("C:grass \nD:sea\nE:x\n")
    # a run folder keeps it as JSON and reads it back as the same template
    import json

    assert get_template(json.dumps(t.describe())) == t
    assert "options" not in TEMPLATES["paper"].describe()  # older run folders still match
    # a layout of one's own may give lines by position too
    own = get_template(
        '{"question": "{question}\\n", "option": "{label}) {text}\\n", "options": ["* {text}\\n"]}'
    )
    assert own.continuation(item, (1, 0, 2)) == "* blood\nB) sky\nC) grass\n"
    with pytest.raises(ConfigError, match="built-in template's"):  # its name, another layout
        get_template(json.dumps({**t.describe(), "options": []}))


CUSTOM = '{"question": "Question: {question}\\nOptions:\\n", "option": "({label}) {text}\\n"}'


def test_a_custom_template_from_json_or_a_json_file(tmp_path: Path) -> None:
    """A layout of one's own (lm-eval-harness style, a Chinese one) was impossible: only the
    two built-in names were accepted."""
    item = MCQItem(id="x", question="Which is red?", options=("sky", "blood"))
    t = get_template(CUSTOM)
    assert t.name == "custom"
    assert t.prefix(item) + t.continuation(item, (1, 0)) == (
        "Question: Which is red?\nOptions:\n(A) blood\n(B) sky\n"
    )
    path = tmp_path / "zh.json"  # a file, with a BOM and a name, in Chinese
    text = '{"name": "zh", "question": "问题：{question}\\n", "option": "{label}．{text}\\n"}'
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    zh = get_template(str(path))
    assert (zh.name, zh.prefix(item), zh.continuation(item, (0, 1))) == (
        "zh",
        "问题：Which is red?\n",
        "A．sky\nB．blood\n",
    )
    # typed into Python with real newlines inside the strings: read as they are
    assert (
        get_template('{"question": "{question}\n", "option": "{text}\n"}').question
        == "{question}\n"
    )
    # the answer cue (CAP's prompts): recorded only when it is not the default, so the layouts
    # of run folders written before it existed still match
    assert "answer" not in t.describe() and "answer" not in get_template("paper").describe()
    cued = get_template(text.replace('"name": "zh", ', '"answer": "答案：", '))
    assert cued.prompt(item) == "问题：Which is red?\nA．sky\nB．blood\n答案："
    assert cued.describe()["answer"] == "答案："
    assert t.prompt(item).endswith("(B) blood\nAnswer:")


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("fancy", "unknown --template 'fancy'; known: mmlu, paper, paper-script, or a JSON obj"),
        ("[1]", "--template: expected a JSON object"),
        ('{"question": "{question}"', "--template: not JSON (Expecting"),
        ('{"question": "{question}"}', "--template: no 'option' format"),
        ('{"question": "{question}", "option": "{text}", "x": 1}', "unknown key 'x'"),
        ('{"question": "{question}", "option": 3}', "'option' must be a string, got int"),
        ('{"question": "Q", "option": "{text}"}', "--template: template 'custom': the question"),
        ('{"question": "{question}", "option": "{label}"}', "the option format needs {text}"),
        ('{"name": "mmlu", "question": "{question}", "option": "{text}"}', "built-in"),
        ("missing.json", "--template missing.json: no such file"),
        # a placeholder nothing fills was scored as written, a typo silently (QA)
        ('{"question": "{question}", "option": "{Label}. {text}"}', "option format has {Label}"),
        ('{"question": "{question}", "option": "{label}{text}{0}"}', "option format has {0}, wh"),
        ('{"question": "{question} {{x}}", "option": "{text}"}', "question format has {x}"),
        ('{"question": "{label} {question}", "option": "{text}"}', "fills {question} only"),
        ('{"question": "{question}", "option": "{text}", "answer": "{label}"}', "sent as writ"),
        ('{"question": "{question}", "option": "{text}", "options": "{text}"}', "list of option"),
        ('{"question": "{question}", "option": "{text}", "options": [1]}', "each a string"),
        ('{"question": "{question}", "option": "{text}", "options": ["{label}"]}', "options[0] f"),
        ('{"question": "{question}", "option": "{text}", "options": ["{text}{x}"]}', "has {x}"),
    ],
)
def test_a_bad_custom_template_is_one_line_naming_the_option(spec: str, needle: str) -> None:
    with pytest.raises(ConfigError) as e:
        get_template(spec)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_configs_take_a_template_name_and_hold_the_template() -> None:
    """The configs' ``template`` is set from a template or a name and read as the template
    (a descriptor field, so that a type checker takes ``template="paper"``): equal, hashed,
    pickled, copied and replaced as a plain field; frozen; a wrong value refused by name."""
    import copy
    import dataclasses
    import pickle

    from contamscope.errors import ConfigError
    from contamscope.perturb import TEMPLATES
    from contamscope.pipeline import CapConfig, MembershipConfig, PermutationConfig

    named = PermutationConfig(template="mmlu")
    given = PermutationConfig(template=TEMPLATES["mmlu"])
    assert named.template is TEMPLATES["mmlu"] and named == given and hash(named) == hash(given)
    assert PermutationConfig().template is TEMPLATES["paper"] != named.template
    assert pickle.loads(pickle.dumps(named)) == named == copy.deepcopy(named)
    assert dataclasses.replace(named, seed=3).template is TEMPLATES["mmlu"]
    assert dataclasses.asdict(named)["template"]["name"] == "mmlu"
    with pytest.raises(dataclasses.FrozenInstanceError):
        named.template = TEMPLATES["paper"]  # type: ignore[misc]
    with pytest.raises(ConfigError, match=r"^--template \(template\): expected a PromptTemplate"):
        PermutationConfig(template=3)  # type: ignore[arg-type]
    # held where a plain field kept it: a config pickled before reads back with its template
    # (it read the default; diff-review QA), a CapConfig's name too
    old = object.__new__(PermutationConfig)
    old.__dict__.update({f.name: getattr(named, f.name) for f in dataclasses.fields(named)})
    assert old == named and old.template is TEMPLATES["mmlu"]
    between = object.__new__(PermutationConfig)  # (kept as "_template" for a while)
    between.__dict__.update(
        {f.name: getattr(named, f.name) for f in dataclasses.fields(named) if f.name != "template"}
        | {"_template": TEMPLATES["mmlu"]}
    )
    assert between.template is TEMPLATES["mmlu"]
    old_cap = object.__new__(CapConfig)
    old_cap.__dict__.update(CapConfig().__dict__ | {"template": "mmlu"})
    assert old_cap.template is TEMPLATES["mmlu"]
    assert MembershipConfig(template="mmlu").template is TEMPLATES["mmlu"]
    assert CapConfig().template is None  # CAP's default: FinEval's prompt or its own layout
    assert CapConfig(template="paper").template is TEMPLATES["paper"]
    with pytest.raises(ConfigError, match="--template lays out multiple-choice prompts"):
        CapConfig(task="qa", template="paper")
