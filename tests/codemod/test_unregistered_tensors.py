"""The model-class fact behind AM045 (``unregistered_tensors``), as the project
view reads it from another module's class."""

from __future__ import annotations

import ast

import pytest

from accel_migrate.codemod.unregistered_tensors import unregistered_tensors


def _class(body: str) -> ast.ClassDef:
    source = "class Net(nn.Module):\n    def __init__(self):\n" + "".join(
        f"        {line}\n" for line in body.splitlines()
    )
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.ClassDef)
    return node


@pytest.mark.parametrize(
    "line",
    [
        "self.alphas = Variable(1e-3 * torch.randn(2, 3).cuda(), requires_grad=True)",
        "self.alphas = (1e-3 * torch.randn(2, 3)).requires_grad_(True)",
        "self.alphas = torch.randn(2, 3).requires_grad_()",
        "self.alphas = torch.zeros(2, 3, requires_grad=True)",
        "self.alphas = torch.zeros(2, 3, requires_grad=True).to(device)",
    ],
)
def test_learnt_tensor_attribute(line: str) -> None:
    found = unregistered_tensors(_class(line), "model_search.py")
    assert found == (
        "`Net.__init__` sets `self.alphas` to a tensor with a gradient of its own "
        "that is not an nn.Parameter (model_search.py, line 3)"
    )


@pytest.mark.parametrize(
    "line",
    [
        "self.alphas = nn.Parameter(1e-3 * torch.randn(2, 3))",
        "self.alphas = nn.Parameter(torch.zeros(2, 3, requires_grad=True))",
        "self.alphas = torch.randn(2, 3).requires_grad_(False)",
        "self.mask = torch.ones(2, 3)",
        "alphas = torch.zeros(2, 3, requires_grad=True)",
        "self.register_buffer('mask', torch.ones(2))",
    ],
)
def test_not_reported(line: str) -> None:
    assert unregistered_tensors(_class(line)) == ""


def test_offset_shifts_the_line() -> None:
    cls = _class("x = 1\nself.alphas = torch.zeros(2, requires_grad=True)")
    assert unregistered_tensors(cls, offset=10).endswith("(line 14)")
