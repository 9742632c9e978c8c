"""contamscope.validate: injected-contamination experiments that measure detector accuracy.

A copy of the model is trained on half of N benchmark items; the detectors are run on all N
after each epoch count and scored against the known ground truth (the permutation paper's
Tables 1 and 2, for any model that fits).
"""

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
)
from contamscope.validate.pipeline import (
    PAPER_DELTAS,
    SUMMARY_SCHEMA,
    ValidateConfig,
    ValidationOutcome,
    run_validation,
)
from contamscope.validate.report import markdown_table, plot_summary
from contamscope.validate.train import EpochLog, TrainConfig, train_epochs

__all__ = [
    "BinaryMetrics",
    "Detector",
    "EpochLog",
    "PAPER_DELTAS",
    "SUMMARY_SCHEMA",
    "Scenario",
    "Split",
    "TrainConfig",
    "ValidateConfig",
    "ValidationOutcome",
    "auc",
    "binary_metrics",
    "detectors_for",
    "evaluate_records",
    "markdown_table",
    "option_set_key",
    "plot_summary",
    "run_validation",
    "split_items",
    "train_epochs",
    "training_order",
    "training_text",
]
