"""Checks of the items a Python caller hands a pipeline (the commands' loaders guarantee them)."""

from __future__ import annotations

import dataclasses
import numbers
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..errors import ConfigError

# for the reanalyse functions' typed keywords, at run time too: get_type_hints() reads it (QA)
if sys.version_info >= (3, 11):
    from typing import Unpack as Unpack
else:
    from typing_extensions import Unpack as Unpack

__all__ = ["check_field_types", "check_items", "check_from"]

_SIMPLE = {
    "int": lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool | np.bool_),
    "float": lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool | np.bool_),
    "bool": lambda v: (
        isinstance(v, bool | np.bool_) or (isinstance(v, numbers.Integral) and v in (0, 1))
    ),
    "str": lambda v: isinstance(v, str),
}
_BUILTIN = {"int": int, "float": float, "bool": bool, "str": str}


def check_field_types(config: object, flags: Mapping[str, str] | None = None) -> None:
    """Refuse a config field annotated ``int``, ``float``, ``bool`` or ``str`` (or one of them
    ``| None``) that holds another type, in one line naming the option as the commands spell
    it (``flags``: field -> option where it is not ``--field-name``; shown with the field:
    ``--bootstrap (n_boot)``). A string where a number belongs failed deep in the run.

    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class C:
    ...     n_boot: int = 2000
    ...     k: float = 0.2
    >>> import numpy as np
    >>> c = C(n_boot=np.int64(500), k=1)
    >>> check_field_types(c)  # numpy's numbers become Python's (run folders write JSON)
    >>> type(c.n_boot).__name__, c.k
    ('int', 1)
    >>> check_field_types(C(n_boot="100"), {"n_boot": "--bootstrap"})
    Traceback (most recent call last):
    ...
    contamscope.errors.ConfigError: --bootstrap (n_boot) '100': expected an int, not str
    """
    for f in dataclasses.fields(config):  # type: ignore[arg-type]
        kinds = [k.strip() for k in str(f.type).split("|")]
        if not kinds or not all(k in _SIMPLE or k == "None" for k in kinds):
            continue
        value = getattr(config, f.name)
        if value is None and "None" in kinds:
            continue
        fits = [k for k in kinds if k != "None" and _SIMPLE[k](value)]
        if fits:
            if type(value) not in _BUILTIN.values():  # numpy's (not JSON), or 0/1 for a bool
                object.__setattr__(config, f.name, _BUILTIN[fits[0]](value))
            elif fits[0] == "bool" and not isinstance(value, bool):
                object.__setattr__(config, f.name, bool(value))
            continue
        flag = (flags or {}).get(f.name)
        name = f"{flag} ({f.name})" if flag else f"--{f.name.replace('_', '-')}"
        want = " or ".join(("an " if k == "int" else "a ") + k for k in kinds if k != "None")
        raise ConfigError(f"{name} {value!r}: expected {want}, not {type(value).__name__}")


def check_items(items: Iterable[Any], kind: type, method: str, where: str = "items") -> list[Any]:
    """The items as a list, once checked: any iterable of them is taken (a generator was
    used up by the checks, and its run folder recorded 0 items); a loaded benchmark, a
    single item or anything else that is not a collection of items is refused, and so are
    items of another kind than ``kind`` (BenBench's question-answer items given to the
    permutation test, ...) and ids given twice (each would be counted twice).

    >>> from contamscope.data import MCQItem
    >>> a = MCQItem("a", "2+2?", ("3", "4"))
    >>> [it.id for it in check_items((x for x in [a]), MCQItem, "the permutation test")]
    ['a']
    >>> check_items(a, MCQItem, "the permutation test")
    Traceback (most recent call last):
    ...
    contamscope.errors.ConfigError: items: a single MCQItem; give a list of items
    >>> check_items([a, a], MCQItem, "the permutation test")
    Traceback (most recent call last):
    ...
    contamscope.errors.ConfigError: items: id 'a' is given 2 times; each item must appear once
    """
    from ..data.items import LoadResult, MCQItem

    if isinstance(items, LoadResult):
        raise ConfigError(
            f"{where}: a loaded benchmark ({items.source}); give its items: loaded.items, or "
            "a selection of them (select_items)"
        )
    if isinstance(items, str | bytes | Mapping) or dataclasses.is_dataclass(items):
        single = "single " if dataclasses.is_dataclass(items) else ""
        raise ConfigError(f"{where}: a {single}{type(items).__name__}; give a list of items")
    try:
        items = list(items)
    except TypeError:
        raise ConfigError(f"{where}: a {type(items).__name__}, not a list of items") from None
    wrong = next((it for it in items if not isinstance(it, kind)), None)
    if wrong is not None:
        raise ConfigError(
            f"{where}: {getattr(wrong, 'id', wrong)!r} is a {type(wrong).__name__}; {method} "
            f"reads {kind.__name__} items"
        )
    few = next((it for it in items if kind is MCQItem and len(it.options) < 2), None)
    if few is not None:  # (a ValueError from the orders' code; library QA)
        raise ConfigError(
            f"{where}: {few.id!r} has {len(few.options)} option(s); a multiple-choice item "
            "needs at least 2"
        )
    ids = Counter(getattr(it, "id", None) for it in items)
    repeated = [(k, n) for k, n in ids.items() if n > 1]
    if repeated:
        (k, n), more = repeated[0], len(repeated) - 1
        also = f" ({more} more ids repeated)" if more else ""
        raise ConfigError(f"{where}: id {k!r} is given {n} times{also}; each item must appear once")
    return items


def check_from(items: Iterable[Any], loaded: Any, where: str = "items") -> None:
    """Refuse an item that is not one of ``loaded``'s (by id): the run records ``loaded``'s
    source, hash and subjects for the items, so another file's items were tested under its
    name (run_membership took virology's items as anatomy's; library QA).

    >>> from types import SimpleNamespace
    >>> from contamscope.data import MCQItem
    >>> a, b = MCQItem("a", "2+2?", ("3", "4")), MCQItem("b", "3+3?", ("6", "5"))
    >>> check_from([a], SimpleNamespace(items=[a], source="x.csv"))
    >>> check_from([a, b], SimpleNamespace(items=[a], source="x.csv"), "reference items")
    Traceback (most recent call last):
    ...
    contamscope.errors.ConfigError: reference items: 'b' is not an item of the loaded benchmark (x.csv); give items of the benchmark passed as loaded
    """
    known = {it.id for it in loaded.items}
    stray = next((it for it in items if it.id not in known), None)
    if stray is not None:
        raise ConfigError(
            f"{where}: {stray.id!r} is not an item of the loaded benchmark ({loaded.source}); "
            "give items of the benchmark passed as loaded"
        )
