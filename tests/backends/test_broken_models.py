"""A model whose own forward pass gives NaN is refused at load, by name, with advice that fits
its dtype: every item was left out, exit 0, with "try --dtype float32" said to a float32 run
(error-path QA)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from contamscope.errors import ModelError


def test_a_model_that_gives_nan_in_float32_is_refused_at_load(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from contamscope.backends.hf import HFBackend

    broken = tmp_path / "m_nan"
    shutil.copytree(tiny_model_path, broken)
    model = AutoModelForCausalLM.from_pretrained(broken)
    with torch.no_grad():
        model.model.layers[0].input_layernorm.weight.fill_(float("nan"))
    model.save_pretrained(broken)
    with pytest.raises(ModelError) as err:
        HFBackend.from_pretrained(
            str(broken), spec="hf:m_nan", identity="m", device="cpu", dtype="float32"
        )
    said = str(err.value)
    assert said.startswith("hf:m_nan: the model's own forward pass gives a non-finite log-prob")
    assert "in float32: its weights are broken" in said and "try --dtype" not in said
