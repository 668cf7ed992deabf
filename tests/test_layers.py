"""The package's shape: imports go down the layers and never in a cycle, and
every example in a docstring runs and says what it claims."""

from __future__ import annotations

import ast
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


def test_the_strategies_and_the_step_time_calculator_import_nothing_of_each_other():
    """``parallel`` runs the strategies; ``steptime`` prices them from formulas: two siblings."""
    graph = layers.import_graph()
    pairs = [
        ("mycollectives.parallel", "mycollectives.steptime"),
        ("mycollectives.steptime", "mycollectives.parallel"),
    ]
    found = [
        f"{a} imports {b}"
        for src, dst in pairs
        for a, targets in sorted(graph.items())
        if a.startswith(src)
        for b in sorted(targets)
        if b.startswith(dst)
    ]
    assert found == []
    assert any(m.startswith("mycollectives.steptime.") for m in graph)


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


def test_every_function_fits_on_a_screen_and_every_module_is_one_a_reader_can_hold():
    """Under 60 lines a function (decorators and docstring included), 300 a module (the project's guide)."""
    long_functions, long_modules = [], []
    for name, path in layers.modules().items():
        source = path.read_text()
        if len(source.splitlines()) > 300:
            long_modules.append(f"{name}: {len(source.splitlines())} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - min([node.lineno, *(d.lineno for d in node.decorator_list)]) + 1
                if lines > 60:
                    long_functions.append(f"{name}.{node.name} (line {node.lineno}): {lines} lines")
    assert long_functions == [] and long_modules == []


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
