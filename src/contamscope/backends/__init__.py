"""Model backends: batched scoring behind one interface, found by spec string."""

from .base import Backend, Capabilities, ProgressFn, ScoreRequest, ScoreResult
from .registry import BACKENDS, load_backend, parse_model_options

__all__ = [
    "Backend",
    "Capabilities",
    "ProgressFn",
    "ScoreRequest",
    "ScoreResult",
    "BACKENDS",
    "load_backend",
    "parse_model_options",
]
