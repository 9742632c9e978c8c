"""The ``--executor`` options shared by scanning commands, and building the executor from them.

A command adds the four options as parameters (defaults below) and calls
:func:`executor_from` with its keyword arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import typer

from ..executors import Executor, ExecutorConfig, make_executor

__all__ = [
    "EXECUTOR_OPT",
    "RAY_ADDRESS_OPT",
    "WORKERS_OPT",
    "GPUS_PER_WORKER_OPT",
    "executor_from",
]

EXECUTOR_OPT = typer.Option(
    "local",
    "--executor",
    help="local (this process) or ray (one model per Ray worker; pip install 'contamscope\\[ray]'). "
    "See docs/scaling.md.",
)
RAY_ADDRESS_OPT = typer.Option(
    None,
    "--ray-address",
    help="With --executor ray: auto (running cluster), HOST:PORT, ray://HOST:PORT (Ray Client: "
    "pip install 'ray\\[client]'); default: $RAY_ADDRESS where set, else a local cluster.",
)
WORKERS_OPT = typer.Option(
    None, "--workers", min=1, help="Ray workers (default: as many as the cluster's GPUs/CPUs fit)."
)
GPUS_PER_WORKER_OPT = typer.Option(
    0.0, "--gpus-per-worker", min=0.0, help="GPUs per Ray worker (0 on CPU clusters)."
)


def check_model(kw: Mapping[str, Any], spec: str | None = None) -> None:
    """The command's model spec and its ``--paraphraser`` if any (or ``spec``) and ``--dtype``,
    checked before the benchmark is read; a local path only where this machine loads the model
    (Ray workers may see paths this machine does not)."""
    from ..backends import check_model_spec

    specs = (
        [spec] if spec else [kw["model"], *([kw["paraphraser"]] if kw.get("paraphraser") else [])]
    )
    for one in specs:
        check_model_spec(one, kw["dtype"], paths=kw["executor"] == "local")


def served_only(kw: Mapping[str, Any]) -> bool:
    """``--executor ray`` for served models only (``openai:``), which run locally instead."""
    specs = [kw.get("model"), kw.get("paraphraser"), *str(kw.get("models") or "").split(",")]
    served = [s.strip() for s in specs if s and s.strip()]
    return kw["executor"] == "ray" and bool(served) and all(s.startswith("openai:") for s in served)


def executor_from(kw: Mapping[str, Any]) -> Executor:
    """The executor named by a command's ``executor``/``ray_address``/``workers``/
    ``gpus_per_worker`` arguments (ConfigError names a bad combination).

    ``--executor ray`` for served models only (``openai:``) runs locally, said in a note: the
    server computes, and Ray workers would only have sent its requests, without the canary
    this process runs first (a CAP run on Ray read log-probs the canary had refused)."""
    from .common import check_cache_flags

    check_cache_flags(kw)
    if served_only(kw):
        from .common import err_console, styled

        given = [
            flag
            for key, flag in (
                ("ray_address", "--ray-address"),
                ("workers", "--workers"),
                ("gpus_per_worker", "--gpus-per-worker"),
            )
            if kw.get(key)
        ]
        err_console.print(
            styled(
                "yellow",
                "note: --executor ray: a served model (openai:) computes on its server",
                "; its requests are sent from this process (-M max_connections=N sets how many "
                "at once)" + (f"; {', '.join(given)} ignored" if given else ""),
            ),
            soft_wrap=True,
        )
        kw = {**kw, "executor": "local", "ray_address": None, "workers": None}
        kw["gpus_per_worker"] = 0.0
    return make_executor(executor_config(kw))


def executor_config(kw: Mapping[str, Any]) -> ExecutorConfig:
    """The executor settings of a command's arguments, checked (ConfigError), nothing started:
    a sweep checks them before its first pair (an unknown --executor was refused after the
    sweep had written its manifest, and a dry run passed it; QA)."""
    return ExecutorConfig(
        kind=kw["executor"],
        address=kw.get("ray_address"),
        workers=kw.get("workers"),
        gpus_per_worker=kw.get("gpus_per_worker") or 0.0,
    )
