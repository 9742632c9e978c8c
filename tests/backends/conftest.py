"""Fixtures for HTTP-backend tests: a real OpenAI-compatible server process on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

SERVER = Path(__file__).with_name("server.py")


class Served:
    """A running test server: its base URL, process, and request statistics."""

    def __init__(self, proc: subprocess.Popen[str], port: int) -> None:
        self.proc = proc
        self.port = port
        self.url = f"http://127.0.0.1:{port}/v1"

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=10) as r:
            return json.loads(r.read())  # type: ignore[no-any-return]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_server(model: Path, *args: str, port: int = 0) -> Served:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--model", str(model), "--port", str(port), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY"):
        proc.kill()
        raise RuntimeError(f"test server did not start: {line!r}")
    return Served(proc, int(line.split()[1]))


@pytest.fixture()
def serve(tiny_model_path: Path) -> Iterator[Callable[..., Served]]:
    """``serve(*server_args, model=None, port=0)`` starts a server; all are stopped afterwards."""
    started: list[Served] = []

    def _start(*args: str, model: Path | None = None, port: int = 0) -> Served:
        s = start_server(model or tiny_model_path, *args, port=port)
        started.append(s)
        return s

    yield _start
    for s in started:
        s.stop()


@pytest.fixture(scope="module")
def tiny_server(tiny_model_path: Path) -> Iterator[Served]:
    """One fault-free server over the tiny model, shared by a test module."""
    s = start_server(tiny_model_path)
    yield s
    s.stop()
