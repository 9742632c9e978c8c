"""Spawned worker pools: a worker outlives no parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

PARENT = """
import os, sys, time
from contamscope.workers import SpawnPool
pool = SpawnPool(1)
print(pool.submit(os.getpid).result(), flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead: it only waits for its new parent to reap it
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def test_workers_exit_when_their_parent_is_killed() -> None:
    """A parent killed with SIGKILL cannot shut its pool down: its idle detector workers
    (about 140 MB each) were left running, re-parented to PID 1."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        worker = int(parent.stdout.readline())  # type: ignore[union-attr]
        assert _alive(worker)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 30
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(worker)
    finally:
        parent.kill()
