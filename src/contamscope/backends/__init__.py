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
from .registry import BACKENDS, load_backend, parse_model_options

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
    "load_backend",
    "parse_model_options",
]
