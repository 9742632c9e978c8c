"""Run the examples in the package's docstrings (they document behaviour, so they must hold)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import contamscope

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(contamscope.__path__, prefix="contamscope.")
    if not m.name.endswith("__main__")  # importing it runs the command line
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(
        module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
    )
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
