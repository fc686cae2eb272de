"""The shared returned-loss analysis: which callers' variables hold a loss that a
function of the file backpropagated and returned."""

from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper

from accel_migrate.codemod.analysis import ModuleIndex

SOURCE = """
def step(model, x):
    loss = model(x).sum()
    loss.backward()
    return loss

def pair(model, x):
    out = model(x)
    loss = out.mean()
    loss.backward()
    return out.max(), loss.detach()

def sometimes(model, x):
    loss = model(x).mean()
    loss.backward()
    if x is None:
        return None
    return loss

def chained(model, x):
    inner = step(model, x)
    return inner

def caller(model, x):
    a = step(model, x)
    first, second = pair(model, x)
    c = sometimes(model, x)
    d = chained(model, x)
"""


def _bound_names() -> dict[str, str]:
    index = ModuleIndex(MetadataWrapper(cst.parse_module(SOURCE)), "accel")
    returned = index.returned_losses
    names = {}
    for (_, name), call in returned.bound.items():
        found = returned.returned_by(call)
        assert found is not None
        names[name] = f"{found.function.name.value}:{found.position}"
    return names


def test_callers_variables_holding_a_returned_loss() -> None:
    assert _bound_names() == {
        "a": "step:None",
        "second": "pair:1",
        "inner": "step:None",
        "d": "chained:None",
    }


def test_companions_of_a_tuple_return() -> None:
    index = ModuleIndex(MetadataWrapper(cst.parse_module(SOURCE)), "accel")
    assert {name for (_, name) in index.returned_losses.companions} == {"first"}
