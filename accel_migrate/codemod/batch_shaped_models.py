"""A model class of a local module that keeps the configured batch size and
shapes a tensor with it in ``forward`` (``self.batch_size = cfg.batch_size`` in
``__init__``, then ``x.view(self.batch_size, self.seq_len, -1)``), or in another
method of its own (the HAN's ``_init_hidden_state()``, called before every
training batch: ``batch_size = self.batch_size`` then ``torch.zeros(2,
batch_size, hidden)``, the GRUs' initial state): under the default global-batch
mode each process's batch has ``batch_size / N`` rows, so the reshape fails or
mixes samples, and a state of the configured size does not fit the share. AM025 reads the fact at the call that builds
the model (``HelperFact.batch_shape``), as it reads a batch size used as a shape
in the script itself.

``parameter_shapes``: the methods of a model class that shape a tensor with one
of their parameters (the Udacity SentimentRNN's ``init_hidden(self,
batch_size)`` making ``weight.new(self.n_layers, batch_size,
self.hidden_dim).zero_()``), which AM025 reads where the script hands such a
method the loader's batch size (``HelperFact.param_shapes``), as it does for a
method of a class of the script's own file. Static only: ``ast``, nothing runs."""

from __future__ import annotations

import ast
from collections.abc import Callable

from .project_nodes import _own_nodes, self_attribute

#: Methods whose leading arguments are a shape (AM025's ``SHAPE_METHODS``).
_SHAPE_METHODS = frozenset(
    {"view", "reshape", "expand", "repeat", "new_zeros", "new_ones", "new_empty", "new"}
)
#: ``torch`` functions whose leading arguments are a shape.
_SHAPE_FUNCTIONS = frozenset(
    f"torch.{name}"
    for name in ("zeros", "ones", "empty", "full", "rand", "randn", "randint")
)
#: How a configured batch size is spelled where ``__init__`` stores it.
_BATCH_NAMES = frozenset({"batch_size", "batchsize", "bsz", "bs"})


def batch_shape(cls: ast.ClassDef, dotted: Callable[[ast.expr], str]) -> str:
    """How a model class shapes a tensor with a batch size it stores, as a
    phrase for a finding (``"`forward` shapes a tensor with `self.batch_size`
    (line 15), which `__init__` sets from `cfg.batch_size` (line 9)"``); "" when
    it does not. ``dotted``: a call's qualified name in the class's module."""
    methods = {
        m.name: m
        for m in cls.body
        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    init = methods.get("__init__")
    if init is None or "forward" not in methods:
        return ""
    stored = _stored_batch_sizes(init)
    if not stored:
        return ""
    # ``forward`` first, then the class's other methods (a state reset the
    # training loop calls, ``model._init_hidden_state()``), in their order.
    ordered = [methods["forward"]] + [
        m for name, m in methods.items() if name not in ("__init__", "forward")
    ]
    for method in ordered:
        aliases = _aliases(method, stored)
        for node in _own_nodes(method):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if not (
                (isinstance(func, ast.Attribute) and func.attr in _SHAPE_METHODS)
                or dotted(func) in _SHAPE_FUNCTIONS
            ):
                continue
            for arg in _shape_args(node):
                attr = self_attribute(arg)
                through = ""
                if attr is None and isinstance(arg, ast.Name) and arg.id in aliases:
                    attr, through = aliases[arg.id], f"as `{arg.id}`, "
                if attr in stored:
                    source, line = stored[attr]
                    return (
                        f"`{method.name}` shapes a tensor with `self.{attr}` "
                        f"({through}line {node.lineno}), which `__init__` sets "
                        f"from `{source}` (line {line})"
                    )
    return ""


def _aliases(
    method: ast.FunctionDef | ast.AsyncFunctionDef, stored: dict[str, tuple[str, int]]
) -> dict[str, str]:
    """Local names a method binds to a stored batch size (``batch_size =
    self.batch_size``, under a branch too): name -> the attribute. A name also
    bound to something else counts: on that path the tensor has the configured
    size."""
    found: dict[str, str] = {}
    for node in _own_nodes(method):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, attr = node.targets[0], self_attribute(node.value)
            if isinstance(target, ast.Name) and attr in stored:
                found[target.id] = attr
    return found


def _stored_batch_sizes(
    init: ast.FunctionDef | ast.AsyncFunctionDef,
) -> dict[str, tuple[str, int]]:
    """``self.X = cfg.batch_size``, ``self.X = cfg["batch_size"]`` or ``self.X =
    batch_size`` (a parameter) in ``__init__``: X -> (the value's code, its line)."""
    found: dict[str, tuple[str, int]] = {}
    for node in _own_nodes(init):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        attr = self_attribute(node.targets[0])
        value = node.value
        name = (
            value.attr
            if isinstance(value, ast.Attribute)
            else value.id if isinstance(value, ast.Name) else _key(value)
        )
        if attr is not None and name.lower() in _BATCH_NAMES:
            found[attr] = (ast.unparse(value), node.lineno)
    return found


def _key(value: ast.expr) -> str:
    """``config['batch_size']``: the string key of a subscript (TFT's model
    keeps its config dict's batch size); "" otherwise."""
    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant):
        key = value.slice.value
        return key if isinstance(key, str) else ""
    return ""


def _shape_args(call: ast.Call) -> list[ast.expr]:
    """The dimensions a shape call is given: its positional arguments, or the
    items of a tuple or list given as the first."""
    args = list(call.args)
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        return list(args[0].elts)
    return args


def parameter_shapes(
    cls: ast.ClassDef, dotted: Callable[[ast.expr], str]
) -> tuple[tuple[str, str, int, str, int], ...]:
    """(method, parameter, its position among the positional parameters after
    ``self``, the shape call's code, its line) for each method but ``__init__``
    that shapes a tensor with a positional parameter it never rebinds
    (``hidden = (weight.new(n_layers, batch_size, hidden_dim).zero_(), ...)``):
    the first such shape of each parameter."""
    found: list[tuple[str, str, int, str, int]] = []
    for method in cls.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if method.name == "__init__" or any(
            isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod")
            for d in method.decorator_list
        ):
            continue
        params = [a.arg for a in [*method.args.posonlyargs, *method.args.args]][1:]
        rebound = {
            t.id
            for node in _own_nodes(method)
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
            for target in (
                node.targets if isinstance(node, ast.Assign) else [node.target]
            )
            for t in ast.walk(target)
            if isinstance(t, ast.Name)
        }
        shapes = sorted(
            (node for node in _own_nodes(method) if _is_shape_call(node, dotted)),
            key=lambda n: (n.lineno, n.col_offset),  # type: ignore[attr-defined]
        )
        for position, name in enumerate(params):
            if name in rebound:
                continue
            for call in shapes:
                if any(
                    isinstance(arg, ast.Name) and arg.id == name
                    for arg in _shape_args(call)  # type: ignore[arg-type]
                ):
                    code = ast.unparse(call)
                    code = code if len(code) <= 60 else code[:57] + "..."
                    found.append((method.name, name, position, code, call.lineno))  # type: ignore[attr-defined]
                    break
    return tuple(found)


def _is_shape_call(node: ast.AST, dotted: Callable[[ast.expr], str]) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Attribute) and func.attr in _SHAPE_METHODS) or dotted(
        func
    ) in _SHAPE_FUNCTIONS
