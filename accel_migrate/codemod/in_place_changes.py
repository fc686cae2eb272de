"""What a statement changes in place: containers grown or shrunk, tensors written.

The divergence analysis binds a variable as rank-local where an assignment sets
it from a rank-local value or under a rank-local test. A container or a tensor
changed in place is set too, with no assignment: ``hard.append(1.0)`` (fx37a),
``queue.pop()``, ``del d[k]``, ``s.discard(v)``, ``buf.zero_()``,
``t.fill_(0)``. Made where only some processes go, or with an argument that
differs between them, the container's length and the tensor's values then
differ between processes (a ``while queue:`` around a step, ``zip(loader,
queue)``, ``if buf.sum() > 0: break``). The divergence walk and the rank-local
sources (the provenance of its facts) read the same list here.

A function of an imported module (``os.remove(path)``, ``F.relu_(x)``,
``torch.nn.utils.clip_grad_norm_(...)``) changes no variable of the
script's: the module is not bound (a ``torch.nn.init`` function's first
argument is). Growers keep fx37a's reading (``sys.path.append`` binds
``sys.path``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .names import CONTAINER_GROWERS, CONTAINER_SHRINKERS, writes_in_place
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import ModuleIndex

#: (the container or tensor changed, the expressions that say how)
Change = tuple[cst.BaseExpression, list[cst.BaseExpression]]
#: The functions of torch that write their first argument in place
#: (``torch.nn.init.zeros_(w)``), by qualified-name prefix.
_WRITING_FUNCTIONS = ("torch.nn.init.",)


def call_change(index: ModuleIndex, call: cst.Call) -> Change | None:
    """The container or tensor ``call`` changes in place, with its arguments:
    a grower (``CONTAINER_GROWERS``), a shrinker (``CONTAINER_SHRINKERS``), a
    torch in-place method (``t.zero_()``), a ``torch.nn.init`` function's first
    argument; None where it is none of these, or a module's own function."""
    arguments = [a.value for a in call.args]
    written = _written_argument(index, call)
    if written is not None:
        return written, arguments[1:]
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    method = func.attr.value
    if method in CONTAINER_GROWERS:
        # (as before fx38a: `sys.path.append`, `os.environ.update` bind them)
        if _module_object(index, func.value, through=False):
            return None
        return func.value, arguments
    if method in CONTAINER_SHRINKERS or writes_in_place(method):
        if _module_object(index, func.value, through=True):
            return None  # `torch.nn.utils.clip_grad_norm_`, `os.environ.pop`
        if _is_self(func.value):
            return None  # a method of the script's class (`self.pop(k)`)
        return func.value, arguments
    return None


def statement_changes(index: ModuleIndex, node: cst.CSTNode) -> list[Change]:
    """Every in-place change a small statement makes: its calls'
    (``call_change``; a shrinker or an in-place write also inside an
    assignment, ``item = queue.pop(0)``, a grower only as the statement,
    fx37a's reading: ``loss = self.update(x1, x2)`` is a method of the
    script's, not a dict's) and its ``del x[k]`` targets'."""
    found: list[Change] = []
    own = node.value if isinstance(node, cst.Expr) else None
    for call in findall(node, m.Call()):
        assert isinstance(call, cst.Call)
        change = call_change(index, call)
        if change is None:
            continue
        func = call.func
        grows = isinstance(func, cst.Attribute) and func.attr.value in CONTAINER_GROWERS
        if grows and call is not own:
            continue
        found.append(change)
    if isinstance(node, cst.Del):
        found.extend(deleted_items(node))
    return found


def deleted_items(node: cst.Del) -> list[Change]:
    """``del d[k]``, ``del xs[:2]``, ``del a[i], b[j]``: each container and the
    expressions that choose what goes."""
    targets = (
        [e.value for e in node.target.elements]
        if isinstance(node.target, (cst.Tuple, cst.List))
        else [node.target]
    )
    found: list[Change] = []
    for target in targets:
        if isinstance(target, cst.Subscript):
            chosen = [
                part for element in target.slice for part in _slice_parts(element.slice)
            ]
            found.append((target.value, chosen))
    return found


def _is_self(receiver: cst.BaseExpression) -> bool:
    return isinstance(receiver, cst.Name) and receiver.value in {"self", "cls"}


def _slice_parts(slice_: cst.BaseSlice) -> list[cst.BaseExpression]:
    if isinstance(slice_, cst.Index):
        return [slice_.value]
    assert isinstance(slice_, cst.Slice)
    return [p for p in (slice_.lower, slice_.upper, slice_.step) if p is not None]


def _written_argument(index: ModuleIndex, call: cst.Call) -> cst.BaseExpression | None:
    """``torch.nn.init.normal_(w, 0, 0.02)``'s ``w``."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if not positional:
        return None
    names = index.qualnames(call.func)
    if any(n.startswith(_WRITING_FUNCTIONS) and writes_in_place(n) for n in names):
        return positional[0].value
    return None


def _module_object(
    index: ModuleIndex, receiver: cst.BaseExpression, through: bool
) -> bool:
    """Is ``receiver`` (``os`` of ``os.remove``, ``F`` of ``F.relu_``) a name
    an import binds and nothing in the file assigns, or with ``through`` an
    attribute of one (``torch.nn.utils`` of ``clip_grad_norm_``)?"""
    root = receiver
    while through and isinstance(root, cst.Attribute):
        root = root.value
    if not isinstance(root, cst.Name):
        return False
    if root.value == index.alias:
        return True  # the runtime's (`accel.clip_grad_norm_`, a rule's rewrite)
    if root.value not in _imported_names(index.module):
        return False
    key = index.key(root)
    return not (key is not None and index.values.get(key))


_IMPORTED: dict[int, tuple[cst.Module, frozenset[str]]] = {}

#: Packages whose names a ``from`` import binds are modules or library
#: functions, never the script's own containers (``from torch import nn``;
#: rev19b: ``from store import HARD``, a list of the project, was skipped).
_LIBRARIES = frozenset(
    {
        "torch",
        "torchvision",
        "torchaudio",
        "numpy",
        "scipy",
        "sklearn",
        "os",
        "sys",
        "math",
        "random",
        "collections",
        "functools",
        "itertools",
        "pathlib",
        "shutil",
        "json",
        "time",
        "logging",
        "copy",
        "typing",
    }
)


def _imported_names(module: cst.Module) -> frozenset[str]:
    """The names the file's ``import`` statements bind, at any level, and those
    its ``from`` imports of a library (``_LIBRARIES``) bind."""
    kept = _IMPORTED.get(id(module))
    if kept is not None and kept[0] is module:
        return kept[1]
    found: set[str] = set()
    for node in findall(module, m.Import() | m.ImportFrom()):
        names = node.names  # type: ignore[attr-defined]
        if isinstance(names, cst.ImportStar):
            continue
        if isinstance(node, cst.ImportFrom) and not _library(node):
            continue
        for alias in names:
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                found.add(alias.asname.name.value)
            else:
                name = alias.name
                while isinstance(name, cst.Attribute):
                    name = name.value
                if isinstance(name, cst.Name):
                    found.add(name.value)
    result = frozenset(found)
    if len(_IMPORTED) > 64:
        _IMPORTED.clear()
    _IMPORTED[id(module)] = (module, result)
    return result


def _library(node: cst.ImportFrom) -> bool:
    """Is ``node`` a ``from`` import of one of ``_LIBRARIES``?"""
    if node.relative or node.module is None:
        return False
    root = node.module
    while isinstance(root, cst.Attribute):
        root = root.value
    return isinstance(root, cst.Name) and root.value in _LIBRARIES
