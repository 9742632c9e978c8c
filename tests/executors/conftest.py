"""A real local Ray cluster (2 CPUs) shared by the executor tests; skipped without Ray."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    ray = pytest.importorskip(
        "ray", reason="Ray not installed (pip install 'contamscope[ray]'): Ray tests skipped"
    )
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _write_bench(path: Path, n: int) -> Path:
    rows = [
        f"Question number {i} about topic {i % 7}?,red {i},blue {i * 3},green,pink {i % 5},A"
        for i in range(n)
    ]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def write_bench() -> Callable[[Path, int], Path]:
    """Writes an MMLU-style CSV with ``n`` four-option questions."""
    return _write_bench
