"""Small recognisers of ``accel_migrate.codemod.patterns`` that several rules share."""

from __future__ import annotations

import libcst as cst
import pytest

from accel_migrate.codemod.names import SAME_OBJECT
from accel_migrate.codemod.patterns import strip_methods, torch_alias
from accel_migrate.codemod.rules.batch_size_shapes import KEEP_ROWS


@pytest.mark.parametrize(
    ("expr", "methods", "stripped"),
    [
        ("Net().to(device).eval()", SAME_OBJECT, "Net()"),
        ("model.cuda()", SAME_OBJECT, "model"),
        # `state_dict()` returns something else: the chain stops there
        ("model.state_dict().to(device)", SAME_OBJECT, "model.state_dict()"),
        ("model", SAME_OBJECT, "model"),
        ("x.to(device).float()", KEEP_ROWS, "x"),
        # `view` reshapes: not a method that keeps the rows
        ("x.view(-1).to(device)", KEEP_ROWS, "x.view(-1)"),
        # an attribute, not a call of it
        ("model.to", SAME_OBJECT, "model.to"),
    ],
)
def test_strip_methods_removes_only_the_calls_of_the_set_at_the_end(
    expr: str, methods: frozenset[str], stripped: str
) -> None:
    node = cst.parse_expression(expr)
    assert cst.Module([]).code_for_node(strip_methods(node, methods)) == stripped


@pytest.mark.parametrize(
    ("source", "alias"),
    [
        ("import torch\n", "torch"),
        ("import os, torch as t\n", "t"),
        ("import torch.nn as nn\nimport torch\n", "torch"),
        ("from torch import nn\n", None),
        ("import torch.nn\n", "torch"),  # binds torch, as `import torch` does
        ("import torch.nn as nn\n", None),
        # only the file's top level: a function's import binds a local name
        ("def f():\n    import torch\n", None),
        ("", None),
    ],
)
def test_torch_alias_is_the_name_a_top_level_import_torch_binds(
    source: str, alias: str | None
) -> None:
    assert torch_alias(cst.parse_module(source)) == alias
