"""Fused element-wise kernels for a transformers decoder (``-M fuse``; on by default on CUDA).

On a GPU the matrix products of a scoring pass are about half its device time; most of the
rest was element-wise work that eager PyTorch runs as many small kernels, each a full read and
write of its tensors: the rotary embedding (the query and key are strided views, so four or
five kernels each), RMSNorm (five kernels and a float32 copy) and the gated activation
(docs/performance.md, "Round 3"). :func:`fuse` hands these to ``torch.compile``, which writes
one kernel each from the model's own code:

- every RMSNorm-like module (class name ending in ``RMSNorm``) and every gated MLP (a module
  with ``gate_proj``, ``up_proj`` and ``down_proj``, or Phi-3's ``gate_up_proj`` and
  ``down_proj``): the instance's ``forward`` becomes a
  compiled copy of its class's ``forward`` (one compiled function per class, shared by the
  model's layers; the matrix products inside stay cuBLAS calls);
- the modeling module's ``apply_rotary_pos_emb``: replaced by a function that runs a compiled
  copy while a fused model is running (:func:`running`) and the original otherwise, so other
  models of the family in the process keep the eager code.

Compiling from the model's own code keeps each family's formula (Gemma's ``1 + weight``, its
GELU) without a kernel per family. The numbers are the same computation rounded differently
(a fused kernel keeps float32 between the steps that eager PyTorch rounds to the model's
dtype); :func:`fuse` checks the fused model's final states against the eager ones on a probe
batch and undoes everything where they differ by more than that, or where compiling fails.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Fused", "fuse", "fusible", "running"]

_RUNNING: contextvars.ContextVar[bool] = contextvars.ContextVar("contamscope_fused", default=False)
_MARK = "_contamscope_fused_original"


@contextlib.contextmanager
def running() -> Iterator[None]:
    """Inside this block, the patched rotary functions run their compiled copies."""
    token = _RUNNING.set(True)
    try:
        yield
    finally:
        _RUNNING.reset(token)


@functools.cache
def _compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` compiled once per process for all shapes (``dynamic=True``)."""
    import torch

    return torch.compile(fn, dynamic=True)


def _is_norm(module: Any) -> bool:
    return type(module).__name__.endswith("RMSNorm") and hasattr(module, "weight")


def _is_gated_mlp(module: Any) -> bool:
    """A gated MLP: ``gate_proj`` and ``up_proj`` (Llama, Qwen2, Gemma), or one ``gate_up_proj``
    whose output the forward splits in two (Phi-3), then ``down_proj``."""
    if not hasattr(module, "down_proj"):
        return False
    return hasattr(module, "gate_up_proj") or all(
        hasattr(module, n) for n in ("gate_proj", "up_proj")
    )


def _wrapped(module: Any) -> bool:
    """A module whose forward something else already replaced (accelerate's offloading hooks,
    another patch): left as it is."""
    return "forward" in module.__dict__ or hasattr(module, "_hf_hook")


def fusible(model: Any) -> tuple[list[Any], list[types.ModuleType]]:
    """The modules of ``model`` whose forward :func:`fuse` compiles, and the modeling modules
    whose ``apply_rotary_pos_emb`` it routes through a compiled copy."""
    modules = [m for m in model.modules() if (_is_norm(m) or _is_gated_mlp(m)) and not _wrapped(m)]
    rotary: dict[str, types.ModuleType] = {}
    for m in model.modules():
        if type(m).__name__.endswith("Attention"):
            home = sys.modules.get(type(m).__module__)
            if home is not None and callable(getattr(home, "apply_rotary_pos_emb", None)):
                rotary[home.__name__] = home
    return modules, list(rotary.values())


def _dispatching(original: Callable[..., Any]) -> Callable[..., Any]:
    def apply_rotary_pos_emb(*args: Any, **kwargs: Any) -> Any:
        if _RUNNING.get():
            return _compiled(original)(*args, **kwargs)
        return original(*args, **kwargs)

    setattr(apply_rotary_pos_emb, _MARK, original)
    return apply_rotary_pos_emb


@dataclass
class Fused:
    """What :func:`fuse` changed in a model (:meth:`undo` restores it)."""

    modules: list[Any] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    """Class names of the compiled modules and ``apply_rotary_pos_emb`` where routed."""

    def undo(self) -> None:
        for m in self.modules:
            m.__dict__.pop("forward", None)
        self.modules = []

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """The modules' own (eager) forwards inside this block."""
        saved = [(m, m.__dict__.pop("forward")) for m in self.modules if "forward" in m.__dict__]
        try:
            yield
        finally:
            for m, forward in saved:
                m.forward = forward


def fuse(model: Any, probe: Callable[[], Any], tolerance: float) -> Fused:
    """Compile ``model``'s norms and gated MLPs and route its rotary embedding (see the module
    docstring). ``probe`` returns the final states of a fixed batch; run fused (inside
    :func:`running`), they must be within ``tolerance`` of the eager ones, measured as the
    largest difference over the largest magnitude; else, or where compiling fails, nothing
    stays fused and the error is raised as :class:`FusionError`."""
    import torch

    modules, homes = fusible(model)
    if not modules and not homes:
        return Fused()
    _settle_compiler()
    want = _detached(probe())
    for m in modules:
        m.forward = types.MethodType(_compiled(type(m).forward), m)
    fused = Fused(modules=list(modules))
    for home in homes:
        if not hasattr(home.apply_rotary_pos_emb, _MARK):
            home.apply_rotary_pos_emb = _dispatching(home.apply_rotary_pos_emb)  # type: ignore[attr-defined]
    fused.kinds = sorted({type(m).__name__ for m in modules}) + [
        f"{h.__name__.rsplit('.', 1)[-1]}.apply_rotary_pos_emb" for h in homes
    ]
    try:
        with running():
            got = _detached(probe())
    except Exception as exc:  # noqa: BLE001 (torch.compile's errors have no common base)
        fused.undo()
        first = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise FusionError(f"compiling failed ({type(exc).__name__}: {first})") from None
    scale = float(want.abs().max()) or 1.0
    off = float((got - want).abs().max()) / scale
    if not torch.isfinite(got).all() or off > tolerance:
        fused.undo()
        raise FusionError(f"fused states differ from the eager ones by {off:.3g} of their scale")
    _forgive_compile_errors()
    return fused


_RECOMPILES = 64


def _settle_compiler() -> None:
    """Process-wide settings for the compiled functions: each is shared by every model of its
    family in the process, and recompiles for each dtype, tensor rank (Gemma's norm also runs
    on the heads' queries and keys) and batch of one row; past PyTorch's default of 8
    versions it warns and runs eager."""
    import torch._dynamo

    cfg = torch._dynamo.config
    if getattr(cfg, "recompile_limit", _RECOMPILES) < _RECOMPILES:
        cfg.recompile_limit = _RECOMPILES


def _forgive_compile_errors() -> None:
    """Once the probe batch compiled and agreed: a shape that fails to compile later in a run
    runs eager instead of stopping the run (``suppress_errors``; set after the probe, so that a
    model that cannot compile at all is reported, not run eager under a fused label)."""
    import torch._dynamo

    if hasattr(torch._dynamo.config, "suppress_errors"):
        torch._dynamo.config.suppress_errors = True


class FusionError(RuntimeError):
    """Fusing failed or changed the numbers (the model is left unfused)."""


def _detached(states: Any) -> Any:
    return states.detach().float().clone()
