"""contamscope.validate: injected-contamination experiments that measure detector accuracy.

A copy of the model is trained on some benchmark items; the method's detectors are run after
each epoch count and scored against the known ground truth: the permutation detectors (the
paper's Tables 1 and 2), BenBench's instance-level n-gram flags and perplexity gap, and CAP's
split-level verdict. One shared pipeline (split, training, checkpoints, resume, summary); each
method supplies a :class:`ValidationMethod`.
"""

from contamscope.validate.benbench import BenBenchValidation
from contamscope.validate.cap import CapValidation, cap_training_text
from contamscope.validate.data import (
    Scenario,
    Split,
    option_set_key,
    split_items,
    training_order,
    training_text,
)
from contamscope.validate.metrics import (
    BinaryMetrics,
    Detector,
    auc,
    binary_metrics,
    detectors_for,
    evaluate_records,
    mean_gap,
)
from contamscope.validate.permutation import PAPER_DELTAS, PermutationValidation
from contamscope.validate.pipeline import (
    SUMMARY_SCHEMA,
    ValidateConfig,
    ValidationMethod,
    ValidationOutcome,
    run_validation,
)
from contamscope.validate.report import markdown_table, plot_summary
from contamscope.validate.train import EpochLog, TrainConfig, train_epochs

__all__ = [
    "BenBenchValidation",
    "BinaryMetrics",
    "CapValidation",
    "Detector",
    "EpochLog",
    "PAPER_DELTAS",
    "PermutationValidation",
    "SUMMARY_SCHEMA",
    "Scenario",
    "Split",
    "TrainConfig",
    "ValidateConfig",
    "ValidationMethod",
    "ValidationOutcome",
    "auc",
    "binary_metrics",
    "cap_training_text",
    "detectors_for",
    "evaluate_records",
    "markdown_table",
    "mean_gap",
    "option_set_key",
    "plot_summary",
    "run_validation",
    "split_items",
    "train_epochs",
    "training_order",
    "training_text",
]
