"""Toy CAP data written to tmp folders (FinEval-style MCQ pairs, QA with years, summaries)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

HEAD = "请回答选择题，从选项A，B，C，D中选择，回答问题。\n问题: "


def fineval_prompt(q: str, opts: list[str], *, ori: bool = True) -> str:
    if ori:  # the ori files' spacing
        body = f"['A':{opts[0]}, 'B': {opts[1]}, 'C':{opts[2]}, 'D':{opts[3]}]"
        return f"{HEAD}{q}\n 选项：{body}\n 答案： "
    body = ", ".join(f"'{lab}': {o}" for lab, o in zip("ABCD", opts))
    return f"{HEAD}{q}\n选项：[{body}]\n答案："


QUESTIONS = [
    ("1+1=____。", ["1", "2", "3", "4"], "B"),
    ("2+2=____。", ["4", "5", "6", "7"], "A"),
    ("3+3=____。", ["5", "7", "6", "9"], "C"),
]


def write_fineval(
    root: Path, questions: list[tuple[str, list[str], str]], *, mod_layout: bool = True
) -> Path:
    """dev/val pairs under ``root/fineval/data`` (mod = options reversed, answer re-mapped; laid
    out as FinEval's mod files, or with ``mod_layout=False`` as its ori files) and a test split
    without answers; returns ``root/fineval``."""
    d = root / "fineval" / "data"
    d.mkdir(parents=True)
    for split in ("dev", "val"):
        ori, mod = [], []
        for q, opts, ans in questions:
            ori.append({"input": fineval_prompt(f"{split} {q}", opts), "output": ans})
            rev = list(reversed(opts))
            mod.append(
                {
                    "input": fineval_prompt(f"{split} {q}", rev, ori=not mod_layout),
                    "output": "DCBA"["ABCD".index(ans)],
                }
            )
        (d / f"ori_{split}.json").write_text(json.dumps(ori, ensure_ascii=False), encoding="utf-8")
        (d / f"mod_{split}.json").write_text(json.dumps(mod, ensure_ascii=False), encoding="utf-8")
    test = [{"input": fineval_prompt(q, o)} for q, o, _ in questions]
    (d / "ori_test.json").write_text(json.dumps(test, ensure_ascii=False), encoding="utf-8")
    return root / "fineval"


@pytest.fixture()
def fineval_dir(tmp_path: Path) -> Path:
    """dev/val pairs (mod = options reversed, answer re-mapped) and a test split without answers."""
    return write_fineval(tmp_path, QUESTIONS)


@pytest.fixture()
def fineval_writer() -> Any:
    """:func:`write_fineval`, for tests that need other questions or layouts."""
    return write_fineval


@pytest.fixture()
def qa_file(tmp_path: Path) -> Path:
    rows = [
        {
            "question": "Sales were 5 in 2018 and 8 in 2019. What was the change?",
            "answer": "3",
            "part": "train",
        },
        {
            "question": "Costs were 2 in 2017 and 6 in 2019. What was the change?",
            "answer": "4",
            "part": "train",
        },
        {
            "question": "Which year had more sales, 2018 (5) or 2019 (8)?",
            "answer": "2019",
            "part": "train",
        },
        {
            "question": "Profit was 1 in 2020 and 4 in 2021. What was the change?",
            "answer": "3",
            "part": "test",
        },
        {
            "question": "Debt was 9 in 2015 and 7 in 2016. What was the change?",
            "answer": "-2",
            "part": "test",
        },
    ]
    p = tmp_path / "qa.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return p
