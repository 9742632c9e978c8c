"""Model backends: batched scoring behind one interface, found by spec string."""

from .base import (
    Backend,
    Capabilities,
    GenerateRequest,
    Generation,
    ProgressFn,
    ScoreRequest,
    ScoreResult,
    TokenStats,
)
from .registry import (
    BACKENDS,
    DTYPE_NAMES,
    check_model_spec,
    load_backend,
    normalize_model_spec,
    parse_model_options,
)

__all__ = [
    "Backend",
    "Capabilities",
    "ProgressFn",
    "ScoreRequest",
    "ScoreResult",
    "TokenStats",
    "GenerateRequest",
    "Generation",
    "BACKENDS",
    "DTYPE_NAMES",
    "check_model_spec",
    "load_backend",
    "normalize_model_spec",
    "parse_model_options",
]
