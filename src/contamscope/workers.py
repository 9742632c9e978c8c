"""Worker processes for host work that runs beside the model (detectors, batch planning).

They are spawned, not forked: the parent may hold a CUDA context and tokenizer or BLAS threads,
which a forked child inherits in a broken state. A spawned child normally re-imports the
parent's main script, which runs it again unless it is guarded by ``if __name__ ==
"__main__"``; these pools start their children with the main module hidden, so contamscope can
be used from any script or notebook. Everything a worker runs must live in an importable module.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

__all__ = ["SpawnPool"]


@contextlib.contextmanager
def _main_hidden() -> Iterator[None]:
    """While starting children: no main module for them to re-import (the spawn start method
    reads ``__main__.__spec__`` and ``__main__.__file__`` when a process starts)."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    spec = getattr(main, "__spec__", None)
    had_file = hasattr(main, "__file__")
    path = getattr(main, "__file__", None)
    try:
        main.__spec__ = None
        if had_file:
            del main.__file__
        yield
    finally:
        main.__spec__ = spec
        if had_file:
            main.__file__ = path


ORPHAN_POLL_SECONDS = 1.0
"""How often a worker checks that the process that started it is still alive."""


def _start_worker(
    parent: int, initializer: Callable[..., None] | None, initargs: tuple[Any, ...]
) -> None:
    """A worker exits when its parent dies: a parent killed with SIGKILL cannot shut the pool
    down, and its idle workers (about 140 MB each) would wait for tasks forever. It ignores
    Ctrl-C, which the parent handles (shutting the pool down): each worker printed a
    KeyboardInterrupt traceback above the parent's one-line 'interrupted' (QA)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(ORPHAN_POLL_SECONDS)
        os._exit(0)

    threading.Thread(target=watch, name="contamscope-orphan-watch", daemon=True).start()
    if initializer is not None:
        initializer(*initargs)


class SpawnPool:
    """A :class:`~concurrent.futures.ProcessPoolExecutor` of spawned workers that do not re-run
    the main script.

    >>> import math
    >>> with SpawnPool(1) as pool:
    ...     pool.submit(math.factorial, 5).result()
    120
    """

    def __init__(
        self,
        workers: int,
        initializer: Callable[..., None] | None = None,
        initargs: tuple[Any, ...] = (),
    ) -> None:
        self.workers = workers
        self._pool = ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_worker,
            initargs=(os.getpid(), initializer, initargs),
        )

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future[Any]:
        # workers start on demand inside submit: keep the main module out of their way
        with _main_hidden():
            return self._pool.submit(fn, *args)

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)

    def __enter__(self) -> SpawnPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown(wait=True, cancel_futures=True)
