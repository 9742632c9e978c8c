"""Reference (paraphrased) versions of a QA benchmark for BenBench: read from files, paired with
the benchmark's items, and checked; generated ones are made in the pipeline batch by batch.

Pairing a reference file with the benchmark (``pairing``):

- ``inline``: the benchmark file itself carries the paraphrase (BenBench rewritten files).
- ``question``: the reference rows carry the original question (BenBench rewritten files):
  matched on the exact question text, whatever the row order.
- ``id``: the reference items have ids that the benchmark items have (an ``id`` field).
- ``order``: otherwise, row *i* paraphrases item *i*; the two files must have as many rows
  (rows skipped in either counted: a skipped row leaves its partner unpaired).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..data.items import LoadResult, QAItem
from ..errors import ConfigError, note
from ..perturb.paraphrase import Paraphrase

__all__ = ["PAIRINGS", "ReferenceSet", "check_pairing", "inline_reference", "pair_reference"]

PAIRINGS = ("auto", "question", "id", "order")


@dataclass
class ReferenceSet:
    """One reference version of a benchmark split: a paraphrase (or failure) per item id."""

    name: str
    """Short label (file stem, ``inline``, ``generated:SPEC``)."""
    source: str
    """File or model it came from."""
    content_hash: str | None
    """sha256 of the reference file (None for inline / generated)."""
    pairing: str
    """How rows were matched to items: inline, question, id, order, generated."""
    pairs: dict[str, Paraphrase] = field(default_factory=dict)
    """Benchmark item id -> paraphrase (``ok`` False: reported, not used)."""
    unmatched_rows: list[str] = field(default_factory=list)
    """Reference rows that paraphrase no benchmark item (``file:line``)."""
    skipped_rows: list[str] = field(default_factory=list)
    """Reference rows that could not be read (``file:line: reason``), as the benchmark's are."""

    def __repr__(self) -> str:
        """One line: the pairs' count, not every paraphrase."""
        return (
            f"ReferenceSet(name={self.name!r}, source={self.source!r}, pairing={self.pairing!r}, "
            f"pairs={len(self.pairs)}, unmatched_rows={len(self.unmatched_rows)}, "
            f"skipped_rows={len(self.skipped_rows)})"
        )

    def describe(self, item_ids: Sequence[str]) -> dict[str, Any]:
        """Provenance and pairing counts over the selected items."""
        got = [self.pairs.get(i) for i in item_ids]
        return {
            "name": self.name,
            "source": self.source,
            "content_hash": self.content_hash,
            "pairing": self.pairing,
            "items_paired": sum(p is not None for p in got),
            "items_unpaired": sum(p is None for p in got),
            "paraphrases_ok": sum(p is not None and p.ok for p in got),
            "paraphrases_failed": sum(p is not None and not p.ok for p in got),
            "unchecked": sum(p is not None and p.reason.startswith("unchecked") for p in got),
            "unmatched_reference_rows": len(self.unmatched_rows),
            "rows_skipped": len(self.skipped_rows),
        }

    def check_pairs(self, item_ids: Sequence[str], option: str) -> str | None:
        """A user error when this reference pairs with none of ``item_ids`` (the wrong file for
        this benchmark, or another split); otherwise a warning line when it pairs with only some
        of them (None when it pairs with all)."""
        n = sum(i in self.pairs for i in item_ids)
        if n == len(item_ids):
            return None
        where = f"{option} {self.source} (pairing by {self.pairing})"
        outside = len(set(self.pairs) - set(item_ids))  # paired with items not selected
        if self.unmatched_rows:
            rows = (
                f"{len(self.unmatched_rows)} of its rows match no benchmark item, first "
                f"{self.unmatched_rows[0]}"
            )
        elif self.skipped_rows:
            bad = len(self.skipped_rows)
            rows = (
                f"{bad} of its rows {'was' if bad == 1 else 'were'} skipped, first "
                f"{self.skipped_rows[0]}"
            )
        else:
            rows = f"no row of it paraphrases the other {len(item_ids) - n}"
        if outside:  # a file cut with head -N beside --limit N: its rows pair other items
            rows += (
                f"; {outside} of its rows "
                + ("paraphrases a benchmark item" if outside == 1 else "paraphrase benchmark items")
                + " the selection left out (--limit, --sample, --drop-shared, --drop-repeats)"
            )
        if n == 0 and outside:
            raise ConfigError(
                f"{where}: paraphrases none of the {len(item_ids)} selected items; {rows}: "
                "select the items it paraphrases, or give the rows of the selected ones"
            )
        if n == 0:
            raise ConfigError(
                f"{where}: paraphrases none of the {len(item_ids)} selected items; {rows}. "
                "Is it a version of this benchmark and split? (--pairing id with --fields "
                "id=FIELD if both files carry ids)"
            )
        return f"{where}: paraphrases {n} of the {len(item_ids)} selected items; {rows}"


def inline_reference(bench: LoadResult[QAItem]) -> ReferenceSet | None:
    """The paraphrases a BenBench rewritten file carries next to each original, if any."""
    with_para = [it for it in bench.items if "paraphrase" in it.meta]
    if not with_para:
        return None
    ref = ReferenceSet(
        name="inline", source=bench.source, content_hash=bench.content_hash, pairing="inline"
    )
    for it in with_para:
        p = it.meta["paraphrase"]
        ref.pairs[it.id] = Paraphrase.given(
            p.get("question"), p.get("answer"), it.answer or "", it.question
        )
    return ref


def _key(text: str) -> str:
    return " ".join(text.split())


def pair_reference(
    bench: LoadResult[QAItem],
    ref: LoadResult[QAItem],
    *,
    name: str,
    pairing: str = "auto",
    option: str = "--reference",
) -> ReferenceSet:
    """Pair a loaded reference file with the benchmark's items (see the module docstring);
    ``option``: how errors name the file (``--train-reference`` for the train split's)."""
    check_pairing(pairing)
    items = bench.items
    rows = ref.items
    own_ids = lambda its: {i.id for i in its if not i.meta.get("id_generated")}  # noqa: E731
    row_ids, item_ids = own_ids(rows), own_ids(items)
    if pairing == "auto":
        if rows and all("paraphrase" in r.meta for r in rows):
            pairing = "question"
        elif row_ids & item_ids:  # generated ids ("test-3") only say the position
            pairing = "id"
        elif row_ids and item_ids:  # both have ids, none alike ("003" and 3)
            a, b = min(item_ids), min(row_ids)
            raise ConfigError(
                f"{option} {ref.source}: its ids and {bench.source}'s share none (e.g. "
                f"{b!r} and {a!r}), so pairing cannot follow them; write the same ids in "
                "both, or --pairing order to pair by position"
            )
        else:
            pairing = "order"
    if pairing == "id" and not (row_ids and item_ids):
        raise ConfigError(
            f"--pairing id: {ref.source if not row_ids else bench.source} has no id field "
            "(its ids are made from the file name and row number, so they would pair by "
            f"position); {_give_ids(bench, ref)} or use --pairing order"
        )
    out = ReferenceSet(
        name=name,
        source=ref.source,
        content_hash=ref.content_hash,
        pairing=pairing,
        skipped_rows=[str(p) for p in ref.problems],
    )

    def para(row: QAItem, original: QAItem) -> Paraphrase:
        if "paraphrase" in row.meta:  # BenBench rewritten row: the paraphrase is in its meta
            p = row.meta["paraphrase"]
            q, a = p.get("question"), p.get("answer")
            return Paraphrase.given(q, a, original.answer or "", original.question)
        return Paraphrase.given(row.question, row.answer, original.answer or "", original.question)

    where = lambda r: f"{r.source}:{r.line}"  # noqa: E731
    if pairing == "question":
        paired_from: dict[str, str] = {}
        by_q: dict[str, list[QAItem]] = {}
        for it in items:
            by_q.setdefault(_key(it.question), []).append(it)
        for row in rows:
            matches = by_q.get(_key(row.question))
            if not matches:
                out.unmatched_rows.append(where(row))
                continue
            first_row = paired_from.get(matches[0].id)
            if first_row is not None:  # one paraphrase per item and reference: say which won
                out.skipped_rows.append(
                    f"{where(row)}: a second paraphrase of the question paired at "
                    f"{first_row} (that one is used)"
                )
                continue
            for it in matches:
                out.pairs[it.id] = para(row, it)
                paired_from[it.id] = where(row)
    elif pairing == "id":
        by_id = {it.id: it for it in items}
        for row in rows:
            match = by_id.get(row.id)
            if match is None:
                out.unmatched_rows.append(where(row))
            else:
                out.pairs[match.id] = para(row, match)
    elif pairing == "order":
        at_items, at_rows = _positions(bench), _positions(ref)
        if (ref.problems or bench.problems) and at_items and at_rows and at_items[1] == at_rows[1]:
            # rows skipped in either file, as many rows in both: row k still pairs item k,
            # counting the skipped ones (a skipped row's partner is left unpaired, and said)
            by_place = dict(zip(at_rows[0], rows))
            for k, it in zip(at_items[0], items):
                if k in by_place:
                    out.pairs[it.id] = para(by_place[k], it)
        elif len(rows) != len(items) or ref.problems or bench.problems:
            skipped = (ref.problems or bench.problems)[:1]
            raise ConfigError(
                f"{option} {ref.source}: cannot pair its {len(rows)} usable rows with the "
                f"{len(items)} benchmark items by position ("
                + (f"a skipped row shifts the rest: {skipped[0]}" if skipped else "counts differ")
                + f"); {_give_ids(bench, ref)} or use BenBench rewritten "
                f"files (this one was read as {ref.format})"
            )
        else:
            for row, it in zip(rows, items):
                out.pairs[it.id] = para(row, it)
    changed = sum(p.reason.startswith("final answer changed") for p in out.pairs.values())
    if pairing != "question" and changed >= 3 and changed * 2 > len(out.pairs):
        # a paraphrase set keeps its answers (GSM8K's rewritten: 1 of 1,319 changed one); most
        # changed say the rows were paired with other items (its rows in another order: QA)
        note(
            f"{option} {ref.source}: {changed} of the {len(out.pairs)} rows paired by {pairing} "
            "change the final answer: are they paired with the right items (rows in another "
            "order, other ids)? Those paraphrases are not used"
        )
    return out


def _positions(loaded: LoadResult[QAItem]) -> tuple[list[int], int] | None:
    """Each item's place among all of its file's rows, the skipped ones counted, and how many
    rows there are; None when that cannot be told (a problem that names no row of this file,
    an item without a line)."""
    lines = [it.line for it in loaded.items if it.line is not None]
    skipped = [p.line for p in loaded.problems if p.source == loaded.source and p.line is not None]
    if len(skipped) != len(loaded.problems) or len(lines) != len(loaded.items):
        return None
    order = sorted({*lines, *skipped})
    if len(order) != len(lines) + len(skipped):  # (a line both read and skipped)
        return None
    place = {line: k for k, line in enumerate(order)}
    return [place[line] for line in lines], len(order)


def _give_ids(*loaded: LoadResult[QAItem]) -> str:
    """How to pair by id: an ``id`` field its files have and their format does not read (a
    GSM8K-layout file's) is named (the advice was to give the files the id field they had;
    QA); else give both files one."""
    unread = [r.source for r in loaded if any(i.meta.get("id_generated") for i in r.items[:1])
              and _first_keys(r.source) >= {"id"}]  # fmt: skip
    if len(unread) == len(loaded):
        return (
            f"both files have an 'id' field, which the {loaded[0].format} layout does not "
            "read: give --fields id=id"
        )
    return "give both files an id field (--fields id=...)"


def _first_keys(source: str) -> set[str]:
    """The keys of a JSONL file's first record, or none (not JSONL, not readable)."""
    import json
    from pathlib import Path

    try:
        with open(Path(source), "rb") as fh:
            for raw in fh:
                if raw.strip():
                    rec = json.loads(raw.decode("utf-8-sig"))
                    return set(rec) if isinstance(rec, dict) else set()
    except (OSError, ValueError, RecursionError):
        pass
    return set()


def check_pairing(pairing: str) -> None:
    """``--pairing`` is one of :data:`PAIRINGS` (checked before any file is read)."""
    if pairing not in PAIRINGS:
        raise ConfigError(f"--pairing {pairing!r}: expected one of {', '.join(PAIRINGS)}")
