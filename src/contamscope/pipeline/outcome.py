"""What a pipeline's ``run_*`` returns: the summary, the run folder, and how the work went."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import StoreError
from ..store import read_records

__all__ = ["Outcome", "VerdictOutcome"]

LINE_METHODS = ("benbench", "membership")
"""Methods whose summaries held no verdict before (their commands printed a verdict line)."""

_SAME_RUN = (
    "benchmark", "selection", "config", "analysis", "counts", "statistics", "verdict",
    "natural_order", "by_subject", "excluded_items",
)  # fmt: skip
"""Summary keys that tell this outcome's run from a later one written into its folder: what
the records decide, and the model (its spec and fingerprint) that scored them. Not ``created``
or ``timings``, which a resume that scored nothing rewrites (the records were refused as
another run's; QA), nor the model's reply counts."""


def printed_verdict(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The verdict line a BenBench or membership command prints for ``summary``
    (``verdict_line`` of :mod:`contamscope.report.benbench` or
    :mod:`contamscope.report.membership`), as summary.json stores a verdict."""
    import importlib

    from ..detectors.verdict import line_verdict

    report = importlib.import_module(f"..report.{summary['method']}", __package__)
    return line_verdict(report.verdict_line(summary))


def summary_verdict(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The verdict of a summary (:attr:`Outcome.verdict`): its ``verdict``, or for a BenBench
    or membership summary written before it held one, the verdict its command printed."""
    v = summary.get("verdict")
    if "verdict" not in summary and summary.get("method") in LINE_METHODS:
        v = printed_verdict(summary)
    return v if isinstance(v, dict) else None


def _same_run(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether summaries ``a`` and ``b`` are of one run's records (another model whose
    answers were all as wrong gave the same counts and statistics: its records were
    returned; diff-review QA)."""

    def model(s: dict[str, Any]) -> tuple[Any, Any]:
        m = s.get("model")
        return (m.get("spec"), m.get("fingerprint")) if isinstance(m, dict) else (m, None)

    # (the verdict as each gives it: a resume wrote it into a summary that had none, and the
    # same records were refused; diff-review QA)
    same = all(a.get(k) == b.get(k) for k in _SAME_RUN if k != "verdict")
    return same and model(a) == model(b) and summary_verdict(a) == summary_verdict(b)


@dataclass
class Outcome:
    """The result of one run, the same for every method (the permutation test and CAP add
    ``problems``: skipped input rows).

    The per-item records are in the run folder (``items.jsonl``), read by :meth:`records`.
    """

    summary: dict[str, Any]
    """summary.json's contents: provenance, counts, statistics (and ``verdict`` where the
    method has one)."""
    run_dir: Path
    scored_now: int = 0
    """Items this call computed (scored; for CAP, generated answers for)."""
    resumed: int = 0
    """Items found done in the run folder and not computed again."""

    def __post_init__(self) -> None:
        # exactly what summary.json holds: its keys are strings (an options histogram's 4 was
        # the int 4 here and "4" in the file, so code written against one failed on the other)
        self.summary = json.loads(json.dumps(self.summary))
        self._folder = Path(self.run_dir).resolve()
        """Where the records are, whatever the working folder is when they are read."""

    @property
    def verdict(self) -> dict[str, Any] | None:
        """The summary's dataset verdict: ``label`` and ``reasoning`` (the sentence the
        command printed), and for every method but CAP (whose label names the split it
        points at) ``signal`` (True/False, None when there is nothing to say) and ``alpha``.
        None where there is none (a BenBench run without a split to test). A BenBench or
        membership summary written before it held its verdict gives the verdict its command
        printed (``verdict_line`` of :mod:`contamscope.report.benbench` or
        :mod:`contamscope.report.membership`)."""
        return summary_verdict(self.summary)

    def records(self) -> list[dict[str, Any]]:
        """The run's per-item records (``items.jsonl``), in file order.

        Refused when the folder no longer holds this run's records: it was run again on
        other items or settings, or re-analysed with other settings, since (the same run
        resumed holds the same records), or it is gone."""
        path = self._folder / "items.jsonl"
        try:
            stored = json.loads((self._folder / "summary.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            stored = None
        if not isinstance(stored, dict) or not path.exists():
            raise StoreError(f"{self._folder}: this run's records are no longer there")
        if not _same_run(stored, self.summary):
            raise StoreError(
                f"{self._folder}: the folder was written again after this outcome (summary of "
                f"{stored.get('created')}); its records are another run's"
            )
        return read_records(path)

    def __repr__(self) -> str:
        """One line (the summary, printed whole, ran to kilobytes in a notebook)."""
        v = self.verdict
        label = f", verdict={v.get('label')!r}" if v else ""
        return (
            f"{type(self).__name__}(run_dir={str(self.run_dir)!r}, "
            f"scored_now={self.scored_now}, resumed={self.resumed}{label})"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable copy (paths as strings)."""
        return {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}


@dataclass(repr=False)  # Outcome.__repr__: the summary is too long to print
class VerdictOutcome(Outcome):
    """The outcome of a method whose every run has a verdict (the permutation test, CAP),
    typed so; ``problems``: the input rows skipped."""

    problems: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> dict[str, Any]:
        """The dataset verdict (``label``, ``reasoning``, ...): every run of this method has
        one (typed so, where :attr:`Outcome.verdict` may be None)."""
        v = super().verdict
        return v if v is not None else {}
