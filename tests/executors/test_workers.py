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


BUSY = """
import os, sys, time
from contamscope.workers import SpawnPool
try:
    with SpawnPool(2) as pool:
        [pool.submit(os.getpid).result() for _ in range(2)]  # both workers up, then idle
        print("busy", flush=True)
        time.sleep(60)  # the parent's own work (scoring the next batch)
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr)
    sys.exit(130)
"""


def test_ctrl_c_to_the_process_group_is_the_parents_alone() -> None:
    """Ctrl-C reaches every process of the terminal's group: each detector worker printed a
    KeyboardInterrupt traceback above the command's one-line 'interrupted' (QA)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", BUSY],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "busy"
        time.sleep(0.5)  # the workers are started and sleeping in their tasks
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130 and err.strip() == "interrupted", err
    finally:
        proc.kill()
