"""The package's shape: imports go down the layers and never in a cycle, and
every example in a docstring runs and says what it claims."""

from __future__ import annotations

import doctest
import importlib

import pytest

from mycollectives.book import layers


def test_no_import_goes_up_a_layer_or_closes_a_cycle():
    assert layers.violations() == []


def test_no_library_module_imports_the_book():
    """``mycollectives.book`` holds the pages' code; the library never reaches it."""
    graph = layers.import_graph()
    found = [
        f"{a} imports {b}"
        for a, targets in sorted(graph.items())
        if not a.startswith("mycollectives.book")
        for b in sorted(targets)
        if b.startswith("mycollectives.book")
    ]
    assert found == []


def test_the_check_catches_an_upward_import_and_a_cycle():
    graph = {
        "mycollectives.schedule": {"mycollectives.api.core"},  # base imports the API
        "mycollectives.api.core": {"mycollectives.api.checks"},
        "mycollectives.api.checks": {"mycollectives.api.core"},  # a cycle inside a layer
    }
    found = layers.violations(graph)
    assert any("mycollectives.schedule (base) imports mycollectives.api.core (API)" in v for v in found)
    assert any(
        v.startswith("a cycle of imports: mycollectives.api.checks -> mycollectives.api.core") for v in found
    )


def test_every_module_is_in_a_layer():
    for name in layers.modules():
        layers.layer_of(name)


@pytest.mark.parametrize("name", sorted(m for m in layers.modules() if not m.endswith("__main__")))
def test_docstring_examples_run(name):
    import numpy as np
    import torch

    import mycollectives as mc

    module = importlib.import_module(name)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    failed, _ = doctest.testmod(module, optionflags=flags, extraglobs={"mc": mc, "torch": torch, "np": np})
    assert failed == 0, f"{name}: {failed} docstring example(s) failed (run python -m doctest -v on it)"
