"""Where scoring runs: the Executor interface and the in-process (local) executor.

An executor turns a model spec into a scorer with the :class:`~contamscope.store.CachedScorer`
interface (``score`` / ``token_stats`` / ``generate``, ``computed`` / ``reused``, ``backend``,
``fingerprint``), so pipelines do not know where the model runs. ``local`` loads the model in
this process (today's path); ``ray`` loads it once per Ray worker and scores shards there.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

from ..errors import ConfigError
from ..store import CachedScorer, ScoreCache

__all__ = ["ExecutorConfig", "Executor", "LocalExecutor", "make_executor", "EXECUTORS"]

EXECUTORS = ("local", "ray")


class ClusterTooSmall(ConfigError):
    """The workers asked for do not fit the cluster: no run on it can start (a sweep stops at
    its first pair instead of saying it once per pair; QA)."""


@dataclass(frozen=True)
class ExecutorConfig:
    """How and where scoring runs (never changes the numbers, so it is not part of run settings)."""

    kind: Literal["local", "ray"] = "local"
    """``local``: the model is loaded in this process. ``ray``: one model per Ray worker."""
    address: str | None = None
    """Ray cluster to join: None starts a local one, ``auto`` joins the running cluster on this
    machine, ``ray://HOST:PORT`` connects through Ray Client."""
    workers: int | None = None
    """Ray workers (one model each); None = as many as the cluster's GPUs (or CPUs) allow."""
    gpus_per_worker: float = 0.0
    """GPUs reserved per Ray worker (0 on CPU clusters; fractions share a GPU)."""
    cpus_per_worker: float = 1.0
    """CPUs reserved per Ray worker (also its torch thread count on CPU)."""
    shard_requests: int | None = None
    """Requests per shard; None = split each scoring call into about 2 shards per worker."""
    max_retries: int = 3
    """Times one shard is retried after its worker died before the run fails."""
    forward_env: tuple[str, ...] = field(
        default=("CONTAMSCOPE_MODEL_DIR", "HF_HUB_OFFLINE", "HF_HOME", "TRANSFORMERS_OFFLINE")
    )
    """Environment variables copied to workers when the Ray cluster runs on this machine."""

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise ConfigError(f"--executor {self.kind!r}: expected one of {', '.join(EXECUTORS)}")
        if self.kind == "local" and (
            self.address is not None or self.workers is not None or self.gpus_per_worker
        ):
            raise ConfigError("--ray-address, --workers and --gpus-per-worker need --executor ray")
        if self.workers is not None and self.workers < 1:
            raise ConfigError("--workers must be at least 1")
        if self.gpus_per_worker < 0 or self.cpus_per_worker <= 0:
            raise ConfigError("--gpus-per-worker must be >= 0 and --cpus-per-worker > 0")
        if self.shard_requests is not None and self.shard_requests < 1:
            raise ConfigError("shard_requests must be at least 1")
        if self.max_retries < 0:
            raise ConfigError("max_retries must be >= 0")

    def describe(self) -> dict[str, Any]:
        """For progress lines and benchmark records (not run settings: results do not depend on it)."""
        if self.kind == "local":
            return {"kind": "local"}
        return {
            "kind": "ray",
            "address": self.address,
            "workers": self.workers,
            "gpus_per_worker": self.gpus_per_worker,
            "cpus_per_worker": self.cpus_per_worker,
        }


class Executor(ABC):
    """Loads models where scoring runs and hands back scorers; a context manager."""

    config: ExecutorConfig

    @abstractmethod
    def scorer(
        self,
        spec: str,
        *,
        device: str = "auto",
        dtype: str = "auto",
        options: Mapping[str, str] | None = None,
        cache: ScoreCache | None = None,
    ) -> CachedScorer:
        """A scorer for ``spec`` that reads and writes ``cache`` on the driver."""

    def close(self) -> None:  # noqa: B027 (optional hook, no-op by default)
        """Release workers (no-op for the local executor)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def model_key(
    spec: str, device: str, dtype: str, options: Mapping[str, str] | None
) -> tuple[str, str, str, tuple[tuple[str, str], ...]]:
    """What identifies a loaded model: asking again for the same key reuses it."""
    return (spec, device, dtype, tuple(sorted((options or {}).items())))


class LocalExecutor(Executor):
    """The model is loaded in this process; scoring calls run inline. The last model loaded is
    kept, so consecutive scorers for the same model (a sweep's benchmarks) load it once."""

    def __init__(self, config: ExecutorConfig | None = None) -> None:
        self.config = config or ExecutorConfig()
        self._last: tuple[Any, Any] | None = None

    def scorer(
        self,
        spec: str,
        *,
        device: str = "auto",
        dtype: str = "auto",
        options: Mapping[str, str] | None = None,
        cache: ScoreCache | None = None,
    ) -> CachedScorer:
        from ..backends import load_backend

        key = model_key(spec, device, dtype, options)
        if self._last is None or self._last[0] != key:
            self._last = None  # free the previous model before loading the next
            self._last = (key, load_backend(spec, device=device, dtype=dtype, options=options))
        return CachedScorer(self._last[1], cache)

    def close(self) -> None:
        self._last = None


def make_executor(config: ExecutorConfig) -> Executor:
    """The executor named by ``config.kind``; ``ray`` without Ray installed names the extra."""
    if config.kind == "local":
        return LocalExecutor(config)
    from .ray_pool import RayExecutor

    return RayExecutor(config)
