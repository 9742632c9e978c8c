"""The Ray executor: one model per Ray worker, shards scored there, results streamed back.

Each worker is a Ray actor that loads the model once with :func:`load_backend` (the same fast
engine, or the vLLM backend on GPU nodes) and scores shards of requests. The driver keeps the
score cache: it sends only requests the cache lacks, and writes each shard's results as it
arrives (:class:`~contamscope.executors.sharding.StreamingScorer`). A worker that dies (killed,
out of memory, node lost) is replaced and its shard is queued again, to be taken by the next idle
worker; a shard whose workers die ``max_retries + 1`` times fails the run with a clear message.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import socket
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..backends.base import (
    Backend,
    Capabilities,
    GenerateRequest,
    Generation,
    ProgressFn,
    ScoreRequest,
    ScoreResult,
    TokenStats,
)
from ..errors import ConfigError, ContamscopeError, ModelError, note
from ..store import CachedScorer, ScoreCache
from .base import ClusterTooSmall, Executor, ExecutorConfig, model_key
from .sharding import StreamingScorer, plan_shards

__all__ = ["RayExecutor", "RemoteBackend", "PoolStats", "ray_available"]

INSTALL_HINT = "--executor ray needs Ray: pip install 'contamscope[ray]'"


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return ray


class ScoringWorker:
    """Body of one Ray actor: loads the model once, then scores shards."""

    def __init__(self) -> None:
        self.backend: Backend | None = None
        self.busy = 0.0
        """Seconds spent inside backend calls (benchmarks compare it with wall time)."""

    def load(
        self, spec: str, device: str, dtype: str, options: Mapping[str, str]
    ) -> dict[str, Any]:
        from ..backends import load_backend

        self.backend = load_backend(spec, device=device, dtype=dtype, options=options)
        caps = self.backend.capabilities
        threads = None
        with contextlib.suppress(ImportError):
            import torch

            threads = torch.get_num_threads()
        return {
            "pid": os.getpid(),
            "torch_threads": threads,
            "node": os.uname().nodename,
            "spec": self.backend.spec,
            "fingerprint": self.backend.fingerprint(),
            "legacy_fingerprints": list(self.backend.legacy_fingerprints()),
            "describe": self.backend.describe(),
            "local_cpu": self.backend.computes_on_local_cpu,
            "capabilities": dataclasses.asdict(caps),
        }

    def run(self, kind: str, requests: list[Any]) -> list[Any]:
        assert self.backend is not None, "load() first"
        fn = {
            "score": self.backend.score,
            "token_stats": self.backend.token_stats,
            "generate": self.backend.generate,
        }[kind]
        t0 = time.perf_counter()
        try:
            return fn(requests)  # type: ignore[operator,no-any-return]
        finally:
            self.busy += time.perf_counter() - t0

    def busy_seconds(self) -> float:
        return self.busy

    def decode(self, tokens: list[int]) -> str:
        assert self.backend is not None, "load() first"
        return self.backend.decode(tokens)


@dataclass
class PoolStats:
    """What the pool did (benchmarks and tests read it)."""

    shards: int = 0
    """Shards finished."""
    retried: int = 0
    """Shards queued again because their worker died."""
    replaced: int = 0
    """Workers started to replace dead ones."""
    requests: int = 0
    """Requests scored by workers."""


def _ray_words(exc: BaseException) -> str:
    """Ray's connection error in this command's words: it names Ray's own ``--address`` flag.

    >>> _ray_words(ConnectionError("Could not find any running Ray instance. Please specify "
    ...     "the one to connect to by setting `--address` flag or `RAY_ADDRESS` environment variable."))
    'Could not find any running Ray instance (start one with `ray start --head`, or leave out --ray-address and unset RAY_ADDRESS to start a local one)'
    """
    text = str(exc) or type(exc).__name__
    if "Could not find any running Ray instance" in text:
        return (
            "Could not find any running Ray instance (start one with `ray start --head`, or "
            "leave out --ray-address and unset RAY_ADDRESS to start a local one)"
        )
    return text


class _WorkerDied(ModelError):
    """A Ray worker died while it loaded the model or answered the driver."""


@dataclass
class _Worker:
    handle: Any
    pid: int
    node: str


class _Pool:
    """A fixed number of model-holding actors, with dead ones replaced."""

    def __init__(
        self,
        ray: Any,
        actor_cls: Any,
        load_args: tuple[Any, ...],
        n_workers: int,
        config: ExecutorConfig,
    ) -> None:
        self.ray = ray
        self.actor_cls = actor_cls
        self.load_args = load_args
        self.config = config
        self.stats = PoolStats()
        self.on_dispatch: Callable[[int, int, int], None] | None = None
        """Test hook: called with (worker pid, shard number, attempt) right after a shard is sent."""
        self.info: dict[str, Any] = {}
        self.workers = self._start(n_workers)

    def _start(self, n: int) -> list[_Worker]:
        handles = [self.actor_cls.remote() for _ in range(n)]
        infos = self._get([h.load.remote(*self.load_args) for h in handles])
        fps = {i["fingerprint"] for i in infos}
        if len(fps) > 1:
            raise ModelError(
                f"workers loaded {self.load_args[0]!r} with different fingerprints "
                f"({', '.join(sorted(fps))}): mixed GPU types or library versions in the cluster; "
                "pin --dtype or use a uniform cluster"
            )
        if self.info and infos and infos[0]["fingerprint"] != self.info["fingerprint"]:
            raise ModelError("a replacement worker loaded the model with a different fingerprint")
        if infos and not self.info:
            self.info = infos[0]
        return [_Worker(h, i["pid"], i["node"]) for h, i in zip(handles, infos)]

    def _get(self, refs: Any) -> Any:
        """``ray.get`` with a worker's own error (unknown model, missing extra) as one line."""
        try:
            return self.ray.get(refs)
        except self._died() as exc:  # (a traceback, exit 1: Ray QA)
            raise _WorkerDied(
                f"a Ray worker died ({type(exc).__name__}); results so far are saved, re-run "
                "to resume"
            ) from None
        except self.ray.exceptions.RayTaskError as exc:
            for ref in refs if isinstance(refs, list) else []:
                # the other workers' errors, read so that Ray does not print each as an
                # 'Unhandled error' traceback (every worker fails to load a missing model; QA)
                with contextlib.suppress(Exception):
                    self.ray.get(ref, timeout=30)
            cause = getattr(exc, "cause", None)
            if isinstance(cause, ContamscopeError):
                raise cause from None
            raise ModelError(f"a Ray worker failed: {cause or exc}") from None

    def _died(self) -> tuple[type[BaseException], ...]:
        ex = self.ray.exceptions
        names = ("RayActorError", "WorkerCrashedError", "OutOfMemoryError", "ObjectLostError")
        return tuple(getattr(ex, n) for n in names if hasattr(ex, n))

    def stream(self, kind: str, requests: Sequence[Any]) -> Iterator[tuple[list[int], list[Any]]]:
        """Score ``requests`` on the workers; yield (indices, results) per finished shard."""
        cfg = self.config
        shards = plan_shards(requests, 2 * len(self.workers), cfg.shard_requests)
        queue: deque[int] = deque(range(len(shards)))
        attempts = [0] * len(shards)
        idle = list(self.workers)
        inflight: dict[Any, tuple[int, _Worker]] = {}
        died = self._died()
        while queue or inflight:
            while queue and idle:
                w = idle.pop(0)
                sid = queue.popleft()
                ref = w.handle.run.remote(kind, [requests[i] for i in shards[sid]])
                inflight[ref] = (sid, w)
                if self.on_dispatch is not None:
                    self.on_dispatch(w.pid, sid, attempts[sid])
            ready, _ = self.ray.wait(list(inflight), num_returns=1)
            ref = ready[0]
            sid, w = inflight.pop(ref)
            try:
                results = self.ray.get(ref)
            except died as exc:
                attempts[sid] += 1
                self.stats.retried += 1
                if attempts[sid] > cfg.max_retries:
                    raise ModelError(
                        f"shard {sid} of {len(shards)}: its worker died {attempts[sid]} times "
                        f"(last: {type(exc).__name__}); results so far are saved, re-run to resume"
                    ) from None
                note(  # (a run that recovered said nothing of it: Ray QA)
                    f"a Ray worker died ({type(exc).__name__}): shard {sid} of {len(shards)} "
                    f"runs again on a new one (attempt {attempts[sid] + 1} of "
                    f"{cfg.max_retries + 1})"
                )
                queue.appendleft(sid)
                idle.append(self._replace(w))
                continue
            except self.ray.exceptions.RayTaskError as exc:
                cause = getattr(exc, "cause", None)
                if isinstance(cause, ContamscopeError):
                    raise cause from None
                raise ModelError(f"a Ray worker failed on shard {sid}: {cause or exc}") from None
            self.stats.shards += 1
            self.stats.requests += len(shards[sid])
            idle.append(w)
            yield shards[sid], results

    def _replace(self, dead: _Worker) -> _Worker:
        self.workers.remove(dead)
        with contextlib.suppress(Exception):  # already gone
            self.ray.kill(dead.handle, no_restart=True)
        tries = self.config.max_retries + 1
        for _ in range(tries):
            try:  # a replacement can die while it loads the model too (Ray QA: a traceback)
                (new,) = self._start(1)
            except _WorkerDied:
                self.stats.retried += 1
                continue
            self.workers.append(new)
            self.stats.replaced += 1
            return new
        raise ModelError(
            f"{tries} replacement Ray workers in a row died while they loaded the model; "
            "results so far are saved, re-run to resume"
        )

    def decode(self, tokens: Sequence[int]) -> str:
        return str(self._get(self.workers[0].handle.decode.remote(list(tokens))))

    def busy_seconds(self) -> list[float]:
        """Seconds each live worker has spent scoring."""
        return [float(x) for x in self._get([w.handle.busy_seconds.remote() for w in self.workers])]

    def close(self) -> None:
        for w in self.workers:
            with contextlib.suppress(Exception):
                self.ray.kill(w.handle, no_restart=True)
        self.workers = []


class RemoteBackend(Backend):
    """Driver-side stand-in for a model loaded in Ray workers: same spec, fingerprint and
    capabilities; calls are scored by the pool (all shards collected)."""

    def __init__(self, pool: _Pool, executor: dict[str, Any]) -> None:
        self._pool = pool
        info = pool.info
        self.spec = info["spec"]
        self.capabilities = Capabilities(**info["capabilities"])
        self._fingerprint = info["fingerprint"]
        self._legacy = [str(f) for f in info.get("legacy_fingerprints", ())]
        self._describe = dict(info["describe"])
        self._executor = executor
        # a worker on the CPU of this driver's node competes with it for the same cores
        self._local_cpu = bool(info.get("local_cpu")) and info.get("node") == os.uname().nodename

    @property
    def computes_on_local_cpu(self) -> bool:
        return self._local_cpu

    @property
    def parallel_scorers(self) -> int:
        return max(1, len(self._pool.workers))

    def fingerprint(self) -> str:
        return str(self._fingerprint)

    def legacy_fingerprints(self) -> tuple[str, ...]:
        """The workers' model's (a Ray run did not reuse the scores stored under them, nor
        resume a folder made under one, as a local run does; mutation QA)."""
        return tuple(self._legacy)

    def describe(self) -> dict[str, object]:
        """The workers' model's description and ``executor`` (kind ray, address, workers, and
        resources each): no summary said a run had used Ray (Ray QA)."""
        return {**self._describe, "executor": self._executor}

    def _collect(
        self, kind: str, requests: Sequence[Any], progress: ProgressFn | None
    ) -> list[Any]:
        out: list[Any] = [None] * len(requests)
        for idx, results in self._pool.stream(kind, requests):
            for i, r in zip(idx, results):
                out[i] = r
            if progress is not None:
                progress(len(idx))
        return out

    def score(
        self, requests: Sequence[ScoreRequest], progress: ProgressFn | None = None
    ) -> list[ScoreResult]:
        return self._collect("score", requests, progress)

    def token_stats(
        self, requests: Sequence[ScoreRequest], progress: ProgressFn | None = None
    ) -> list[TokenStats]:
        self.require(token_logprobs=True, method="token_stats")
        return self._collect("token_stats", requests, progress)

    def generate(
        self, requests: Sequence[GenerateRequest], progress: ProgressFn | None = None
    ) -> list[Generation]:
        self.require(generate=True, method="generate")
        return self._collect("generate", requests, progress)

    def decode(self, tokens: Sequence[int]) -> str:
        return self._pool.decode(tokens)


def check_reachable(address: str, given: str, timeout: float = 5.0) -> None:
    """Refuse a ``HOST:PORT`` (or ``ray://HOST:PORT``) where nothing accepts a connection:
    Ray itself retried such an address for 9.5 minutes and more, printing another address
    (QA). ``auto`` and addresses without a port are left to Ray.

    >>> check_reachable("auto", "--ray-address 'auto'")
    >>> check_reachable("127.0.0.1:1", "--ray-address '127.0.0.1:1'")
    Traceback (most recent call last):
    ...
    contamscope.errors.ConfigError: --ray-address '127.0.0.1:1': nothing accepts connections at 127.0.0.1:1 (ConnectionRefusedError); is the Ray head node running there (`ray start --head` prints its address)?
    """
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        why = (
            type(exc).__name__
            if not isinstance(exc, TimeoutError)
            else f"no answer in {timeout:g} s"
        )
        raise ConfigError(
            f"{given}: nothing accepts connections at {host}:{port} ({why}); is the Ray head "
            "node running there (`ray start --head` prints its address)?"
        ) from None


class RayExecutor(Executor):
    """Scores on a Ray cluster: joins ``config.address`` (or starts a local cluster)."""

    def __init__(self, config: ExecutorConfig) -> None:
        self.config = config
        self.ray = _import_ray()
        self._started = False
        self.pools: list[_Pool] = []
        """Worker pools; only the latest model's pool is kept alive."""
        self._key: Any = None
        env = os.environ.get("RAY_ADDRESS")  # ray.init() joins it when no address is given
        self.local = config.address is None and not env
        given = (
            f"--ray-address {config.address!r}"
            if config.address is not None
            else f"$RAY_ADDRESS {env!r} (set in the environment; unset it to start a local cluster)"
        )
        self._given = given
        address = config.address if config.address is not None else env
        if address and not self.ray.is_initialized():
            check_reachable(address, given)  # cheap: refused with the other settings

    def _ensure_started(self) -> None:
        """Joins or starts the cluster, on the first model asked for: a command's own checks
        (the benchmark, the run folder) come first, where a bad --benchmark path was refused
        only after a local cluster had started (about 20 s; QA)."""
        if self.ray.is_initialized():
            return
        config, given = self.config, self._given
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if config.address is not None:
            kwargs["address"] = config.address
        import signal

        term = signal.getsignal(signal.SIGTERM)
        try:
            self.ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigError(f"{given}: {_ray_words(exc)}") from None
        finally:  # ray.init sets its own SIGTERM handler (exit 15 and a C++ stack dump):
            if signal.getsignal(signal.SIGTERM) is not term:  # the command's is put back,
                with contextlib.suppress(ValueError, TypeError):  # "interrupted", 130 (QA)
                    signal.signal(signal.SIGTERM, term)
        self._started = True

    def _n_workers(self) -> int:
        res = self.ray.cluster_resources()
        cfg = self.config
        cpus, gpus = float(res.get("CPU", 0)), float(res.get("GPU", 0))
        if cfg.gpus_per_worker > 0:
            fit = math.floor(gpus / cfg.gpus_per_worker + 1e-9)
        else:
            fit = math.floor(cpus / cfg.cpus_per_worker + 1e-9)
        fit = min(fit, math.floor(cpus / cfg.cpus_per_worker + 1e-9))
        want = cfg.workers if cfg.workers is not None else fit
        if cfg.gpus_per_worker > 0 and gpus == 0:  # ("0 workers ...: lower --workers"; Ray QA)
            raise ClusterTooSmall(
                f"the Ray cluster has no GPUs; --gpus-per-worker {cfg.gpus_per_worker:g} needs "
                "them (leave it out to score on the CPUs)"
            )
        if want < 1 or want > fit:
            raise ClusterTooSmall(
                f"the Ray cluster has {cpus:g} CPUs and {gpus:g} GPUs; {want} workers x "
                f"{cfg.cpus_per_worker:g} CPUs x {cfg.gpus_per_worker:g} GPUs do not fit "
                "(lower --workers or --gpus-per-worker)"
            )
        return want

    def scorer(
        self,
        spec: str,
        *,
        device: str = "auto",
        dtype: str = "auto",
        options: Mapping[str, str] | None = None,
        cache: ScoreCache | None = None,
    ) -> CachedScorer:
        key = model_key(spec, device, dtype, options)
        if self.pools and self._key == key:
            pool = self.pools[-1]
            return StreamingScorer(RemoteBackend(pool, self.config.describe()), cache, pool.stream)
        for old in self.pools:  # one model on the workers at a time: free GPUs first
            old.close()
        self.pools = []
        self._ensure_started()
        cfg = self.config
        n = self._n_workers()
        actor_opts: dict[str, Any] = {
            "num_cpus": cfg.cpus_per_worker,
            "num_gpus": cfg.gpus_per_worker,
            "max_restarts": 0,
        }
        if self.local:
            env = {k: os.environ[k] for k in cfg.forward_env if k in os.environ}
            if env:
                actor_opts["runtime_env"] = {"env_vars": env}
        actor_cls = self.ray.remote(ScoringWorker).options(**actor_opts)
        if cfg.gpus_per_worker > 0 and device == "auto":
            device = "cuda"
        pool = _Pool(self.ray, actor_cls, (spec, device, dtype, dict(options or {})), n, cfg)
        self.pools.append(pool)
        self._key = key
        backend = RemoteBackend(pool, cfg.describe())
        return StreamingScorer(backend, cache, pool.stream)

    def close(self) -> None:
        for pool in self.pools:
            pool.close()
        self.pools = []
        if self._started:
            self.ray.shutdown()
            self._started = False
