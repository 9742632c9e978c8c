"""Shared fixtures: isolated caches, a tiny random-weight model, the real-data folder."""

from __future__ import annotations

import os
from pathlib import Path

# Tests never use the network; set before huggingface_hub is imported (it reads this at import).
os.environ["HF_HUB_OFFLINE"] = "1"
# In a parallel run (pytest-xdist, `make test`), each worker and the commands it starts compute
# on one thread, so that the workers share the cores rather than oversubscribe them; set before
# torch is imported (it reads this at import).
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys
from collections.abc import Iterator

import pytest

# Commands write a plain progress line a minute where stderr is not a terminal (as here): a
# slow machine would add lines to output that tests read whole; the progress test sets its own.
os.environ["CONTAMSCOPE_PROGRESS_SECONDS"] = "100000"

# test modules import shared helpers (cli_runner) from this folder
sys.path.insert(0, str(Path(__file__).resolve().parent))

BENCHDATA = Path(__file__).resolve().parents[1].parent / "shared" / "benchdata"


@pytest.fixture(scope="session", autouse=True)
def _session_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Fixtures wider than one test (models trained and runs made once per module) keep
    their scores in the session's own cache, not in the user's."""
    saved = os.environ.get("CONTAMSCOPE_CACHE_DIR")
    os.environ["CONTAMSCOPE_CACHE_DIR"] = str(tmp_path_factory.mktemp("session-cache"))
    yield
    if saved is None:
        os.environ.pop("CONTAMSCOPE_CACHE_DIR", None)
    else:
        os.environ["CONTAMSCOPE_CACHE_DIR"] = saved


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_dir: Path) -> None:
    """Every test gets its own score cache; converted models are shared per session."""
    monkeypatch.setenv("CONTAMSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CONTAMSCOPE_MODEL_DIR", str(model_dir))


@pytest.fixture(autouse=True)
def _consoles_follow_the_streams() -> Iterator[None]:
    """The CLI's consoles write to whatever ``sys.stdout``/``sys.stderr`` are at the time. A
    test that leaves one bound to a stream of its own (patching its ``file`` property, whose
    undo binds the stream captured then) sends later tests' output where capsys cannot see
    it: one such test failed another in CI, depending on the order the workers drew. The
    test that leaves it bound fails here, whatever runs after it."""
    yield
    common = sys.modules.get("contamscope.cli.common")
    if common is None:
        return
    bound = [n for n in ("console", "err_console") if getattr(common, n)._file is not None]
    for n in bound:
        getattr(common, n)._file = None
    if bound:
        pytest.fail(f"the test left contamscope.cli.common.{bound[0]} bound to a stream")


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def benchdata() -> Path:
    if not BENCHDATA.is_dir():
        pytest.skip("../shared/benchdata not present (fresh clone): real-data tests skipped")
    return BENCHDATA


@pytest.fixture(scope="session")
def smollm2_tokenizer():  # type: ignore[no-untyped-def]
    """The SmolLM2 tokenizer, read from the bundled GGUF (about 6 s, once per session).

    CONTAMSCOPE_TEST_TOKENIZER=DIR reads a saved copy instead (machines without the bundled
    model package, such as a GPU box that runs only the CUDA tests)."""
    from transformers import AutoTokenizer

    from contamscope.backends.bundled import smollm2_gguf_path

    saved = os.environ.get("CONTAMSCOPE_TEST_TOKENIZER")
    if saved:
        return AutoTokenizer.from_pretrained(saved)

    gguf = smollm2_gguf_path()
    return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory: pytest.TempPathFactory, smollm2_tokenizer) -> Path:  # type: ignore[no-untyped-def]
    """A 2-layer random-weight Llama with the SmolLM2 tokenizer, saved as a model folder."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(smollm2_tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # make log-probs vary a lot between texts
        model.model.embed_tokens.weight.normal_(0, 1.0)
    path = tmp_path_factory.mktemp("tiny") / "tiny-llama"
    model.save_pretrained(path)
    smollm2_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_backend(tiny_model_path: Path):  # type: ignore[no-untyped-def]
    from contamscope.backends.hf import HFBackend

    return HFBackend.from_pretrained(
        str(tiny_model_path),
        spec=f"hf:{tiny_model_path}",
        identity="tiny",
        device="cpu",
        dtype="float32",
        options={"bos": "<|endoftext|>"},
    )


@pytest.fixture(scope="session")
def smollm2_backend(model_dir: Path):  # type: ignore[no-untyped-def]
    import os

    from contamscope.backends import load_backend

    os.environ["CONTAMSCOPE_MODEL_DIR"] = str(model_dir)
    return load_backend("smollm2", device="cpu", dtype="float32")


# Test files that start or reach a local Ray cluster: run one after another in one worker when
# the suite runs in parallel (`make test` runs pytest-xdist with --dist loadgroup).
_RAY_FILES = {
    "backends/test_openai_cli.py",
    "benbench/test_cli_executor.py",
    "cap/test_cli_executor.py",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist's ``--dist loadgroup``, a test file runs whole in one worker (its
    module-scoped runs and models are made once), and the Ray files share one worker."""
    root = Path(__file__).resolve().parent
    for item in items:
        path = item.path.resolve()
        rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
        ray = rel.startswith("executors/") or rel in _RAY_FILES
        item.add_marker(pytest.mark.xdist_group("ray" if ray else rel))
