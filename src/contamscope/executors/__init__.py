"""Where scoring runs: in this process (``local``) or on Ray workers (``ray``).

>>> from contamscope.executors import ExecutorConfig, make_executor
>>> with make_executor(ExecutorConfig()) as ex:  # doctest: +SKIP
...     scorer = ex.scorer("smollm2", cache=None)

The Ray executor needs the ``ray`` extra: ``pip install 'contamscope[ray]'``.
"""

from __future__ import annotations

from .base import EXECUTORS, Executor, ExecutorConfig, LocalExecutor, make_executor
from .sharding import StreamingScorer, plan_shards

__all__ = [
    "EXECUTORS",
    "Executor",
    "ExecutorConfig",
    "LocalExecutor",
    "StreamingScorer",
    "make_executor",
    "plan_shards",
]
