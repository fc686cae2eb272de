"""DataLoaders that a method hands back to callers in other files (AM006's part
of the analysis): Deep-SVDD-PyTorch's ``TorchvisionDataset.loaders(batch_size,
...)`` in base/torchvision_dataset.py, which builds the train and test
DataLoaders and returns them; the trainers of optim/ call
``dataset.loaders(...)`` on the dataset object they are handed.

The file that builds them has no loop over them: its consumers are elsewhere,
reached through a method of an instance, which the analysis does not follow
(in batch mode or not). Preparing the loaders where they are built would shard
them for every consumer, migrated or not: a consumer left unchanged (its model
not prepared) would then train an unsynchronised copy on each process's share.
So a DataLoader returned by a method that its own file never calls is left
unprepared, and the file with it (AM004's whole or nothing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import ModuleIndex


def method_returned_loader(index: ModuleIndex, call: cst.Call) -> str | None:
    """``Class.method`` when ``call`` (a DataLoader) is returned, itself or
    through a variable bound to it, alone or in a tuple, by a method of a class
    of this file that this file never calls by that name; None otherwise."""
    function = index.enclosing_function(call)
    owner = index.enclosing_class(call) if function is not None else None
    if function is None or owner is None:
        return None
    name = function.name.value
    if name.startswith("__") or not _returned(index, function, call):
        return None
    called = any(
        isinstance(c.func, cst.Attribute) and c.func.attr.value == name
        for c in index.calls
    )
    return None if called else f"{owner.name.value}.{name}"


def _returned(index: ModuleIndex, function: cst.FunctionDef, call: cst.Call) -> bool:
    names: set[str] = set()
    statement = _assigned_name(index, call)
    if statement is not None:
        names.add(statement)
    for node in findall(function.body, m.Return()):
        value = node.value  # type: ignore[attr-defined]
        if value is None:
            continue
        items = value.elements if isinstance(value, cst.Tuple) else [value]
        for item in items:
            expr = item.value if isinstance(item, cst.Element) else item
            if expr is call or (isinstance(expr, cst.Name) and expr.value in names):
                return True
    return False


def _assigned_name(index: ModuleIndex, call: cst.Call) -> str | None:
    """``x`` of ``x = DataLoader(...)``."""
    for key, values in index.values.items():
        if any(v is call for v in values):
            return key[1]
    return None
