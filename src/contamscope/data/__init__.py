"""contamscope.data: typed items and benchmark loaders: :func:`load_benchmark` (multiple-choice
items, the permutation and membership tests), :func:`load_qa` (question-answer items, BenBench),
:func:`load_cap` (a CAP benchmark's splits).

>>> from contamscope.data import load_benchmark
>>> result = load_benchmark("mmlu")  # the bundled MMLU test set
>>> len(result.items)
14042
"""

from contamscope.data.cap import CapData, CapFields, load_cap
from contamscope.data.formats import FORMATS
from contamscope.data.items import LoadResult, MCQItem, QAItem, RowProblem, option_labels
from contamscope.data.loaders import bundled_mmlu_path, load_benchmark
from contamscope.data.qa import load_qa
from contamscope.data.records import FieldMap

__all__ = [
    "MCQItem",
    "QAItem",
    "RowProblem",
    "LoadResult",
    "option_labels",
    "load_benchmark",
    "load_qa",
    "load_cap",
    "CapData",
    "CapFields",
    "FieldMap",
    "FORMATS",
    "bundled_mmlu_path",
]
