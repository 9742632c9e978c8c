"""contamscope.data: typed multiple-choice items and benchmark loaders.

>>> from contamscope.data import load_benchmark
>>> result = load_benchmark("mmlu")  # the bundled MMLU test set
>>> len(result.items)
14042
"""

from contamscope.data.formats import FORMATS
from contamscope.data.items import LoadResult, MCQItem, QAItem, RowProblem, option_labels
from contamscope.data.loaders import bundled_mmlu_path, load_benchmark
from contamscope.data.records import FieldMap

__all__ = [
    "MCQItem",
    "QAItem",
    "RowProblem",
    "LoadResult",
    "option_labels",
    "load_benchmark",
    "FieldMap",
    "FORMATS",
    "bundled_mmlu_path",
]
