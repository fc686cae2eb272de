"""Methods of a model class, other than ``forward``, that run the model's layers.

The BiLSTM-CRF's ``loss(self, xs, tags)`` builds its features with
``self.embedding`` and ``self.rnn`` and scores them with ``self.crf.loss``: a
training step that backpropagates ``model.loss(x, y)`` never calls the model
itself. A prepared model exchanges gradients through its own call (DDP and
FSDP run their hooks in ``forward``), and ``model.loss`` reaches the wrapped
module's method past them. Read from a class of the file being migrated and
from a class of another module of the project (``HelperFact.layer_methods``),
for AM042. ``ast`` only: the project view runs without libcst.

A method runs the layers when its statements, or those of the other methods
of the class it calls on ``self``, call ``self(...)`` (or ``self.__call__(...)``),
``self.forward(...)``,
or a layer the class's ``__init__`` builds (``self.rnn(...)``,
``self.crf.loss(...)``: an attribute set there from a call). A method that
only combines what the caller's ``model(x)`` returned (PyTorch-VAE's
``loss_function(*results)``) runs none.
"""

from __future__ import annotations

import ast

from .project_nodes import self_attribute

_SKIPPED = frozenset({"forward", "__init__", "__call__"})


def _methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {
        s.name: s
        for s in cls.body
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def _built_layers(init: ast.FunctionDef | ast.AsyncFunctionDef | None) -> set[str]:
    """``self.x`` attributes that ``__init__`` sets from a call."""
    if init is None:
        return set()
    found: set[str] = set()
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            for target in node.targets:
                attribute = self_attribute(target)
                if attribute is not None:
                    found.add(attribute)
    return found


def _self_attribute(expr: ast.expr) -> str | None:
    """``x`` of ``self.x`` (also of ``self.x.y``); None otherwise."""
    while isinstance(expr, ast.Attribute):
        if isinstance(expr.value, ast.Name) and expr.value.id == "self":
            return expr.attr
        expr = expr.value
    return None


def training_methods(cls: ast.ClassDef) -> tuple[str, ...]:
    """The layer-running methods of ``cls`` (``layer_methods``) that also
    backpropagate, themselves or through a method of the class they call on
    ``self``: a model that trains itself (knowledge-tracing-collection-
    pytorch's ``DKT.train_model(train_loader, test_loader, num_epochs, opt,
    ckpt_path)``, which calls ``self(q, r)`` and ``loss.backward()``)."""
    methods = _methods(cls)
    backward: dict[str, bool] = {}
    calls: dict[str, set[str]] = {}
    for name, method in methods.items():
        backward[name] = False
        calls[name] = set()
        for node in ast.walk(method):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "backward":
                backward[name] = True
            attribute = _self_attribute(func)
            if attribute in methods and isinstance(func, ast.Attribute):
                if isinstance(func.value, ast.Name):  # `self.train_epoch(...)`
                    calls[name].add(attribute)
    changed = True
    while changed:
        changed = False
        for name, called in calls.items():
            if not backward[name] and any(backward[c] for c in called):
                backward[name] = changed = True
    return tuple(name for name in layer_methods(cls) if backward.get(name))


def _written(call: ast.Call) -> str:
    """``call`` as written, its arguments elided where long."""
    text = ast.unparse(call)
    return text if len(text) <= 60 else f"{ast.unparse(call.func)}(...)"


def layer_methods(cls: ast.ClassDef) -> tuple[str, ...]:
    """The methods of ``cls`` (not ``forward``, ``__init__`` or ``__call__``)
    that run the model's layers, in the order the class defines them."""
    return tuple(name for name, _ in layer_calls(cls))


def layer_calls(cls: ast.ClassDef) -> tuple[tuple[str, str], ...]:
    """Each of ``layer_methods(cls)`` with the first call, as written, by which
    it runs the layers (``self.encoder(x)``, ``self(q, r)``), its own or that of
    the first method of the class it calls on ``self`` that runs them: what a
    finding quotes."""
    methods = _methods(cls)
    layers = _built_layers(methods.get("__init__")) - set(methods)
    runs: dict[str, str] = {}
    calls: dict[str, list[str]] = {}
    for name, method in methods.items():
        own = ""
        called: list[str] = []
        for node in sorted(
            (n for n in ast.walk(method) if isinstance(n, ast.Call)),
            key=lambda n: (n.lineno, n.col_offset),
        ):
            func = node.func
            attribute = _self_attribute(func)
            if (isinstance(func, ast.Name) and func.id == "self") or (
                attribute is not None
                # `self.__call__(x)` is `self(x)` (AnubhavGupta3377's fastText
                # `run_epoch`: `y_pred = self.__call__(x)`)
                and (attribute in ("forward", "__call__") or attribute in layers)
            ):
                own = own or _written(node)
            elif attribute in methods:  # `self.__build_features(xs)`
                called.append(attribute)
        runs[name] = own
        calls[name] = called
    changed = True
    while changed:
        changed = False
        for name, called in calls.items():
            through = next((runs[c] for c in called if runs.get(c)), "")
            if not runs[name] and through:
                runs[name] = through
                changed = True
    return tuple(
        (name, runs[name])
        for name, method in methods.items()
        if runs[name]
        and name not in _SKIPPED
        and not any(
            isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod")
            for d in method.decorator_list
        )
    )
