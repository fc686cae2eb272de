"""Stochastic layers of a model class of a local module (``HelperFact.stochastic``).

minGPT's ``model.py`` builds ``nn.Dropout(config.attn_pdrop)`` in
``CausalSelfAttention``, which ``Block`` builds, which ``GPT`` builds; the script
that trains it only writes ``model = GPT(config)``. AM027 (dropout-layers) reads
this fact where a training file builds such a model, as it reads the dropout of
a model class of the file itself: after migration each process draws its own
masks for its share of the batch, so the losses match the original's only
statistically.

A class has stochastic layers when one of its methods builds a dropout layer
(``nn.Dropout``, ``nn.Dropout1d/2d/3d``, ``nn.AlphaDropout``,
``nn.FeatureAlphaDropout``, also inside ``nn.Sequential``/``nn.ModuleDict``
displays), when ``forward`` (or a method it calls on ``self``) calls a
functional dropout (``F.dropout(x, p=self.p, training=self.training)``), also
through a local function that calls one itself, or when
it builds (or derives from) a local class or calls a local function that has
them, in its module or in another local module. A function that returns a model
has them when it builds such a class (``def build_model(cfg): return
Classifier(cfg)``). A probability written as ``0`` and a functional call with
``training=False`` do not count; any other probability does, also one read from
a config (``p=cfg.dropout``): its value is not known statically.

Static only: ``ast``, nothing is imported or run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .project_helpers import HelperFacts

#: Dropout layers (module classes), by qualified name.
DROPOUT_LAYERS = frozenset(
    f"torch.nn.{n}"
    for n in (
        "Dropout",
        "Dropout1d",
        "Dropout2d",
        "Dropout3d",
        "AlphaDropout",
        "FeatureAlphaDropout",
    )
)
#: Functional dropout, by qualified name.
DROPOUT_FUNCTIONS = frozenset(
    {
        f"torch.nn.functional.{n}"
        for n in (
            "dropout",
            "dropout1d",
            "dropout2d",
            "dropout3d",
            "alpha_dropout",
            "feature_alpha_dropout",
        )
    }
    | {"torch.dropout", "torch.alpha_dropout", "torch.feature_dropout"}
)
#: Code shown in a phrase is cut to this many characters.
_SHOWN = 60


def stochastic_layers(
    reader: HelperFacts,
    node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef,
    builds_model: bool = True,
) -> str:
    """Where the model class (or model-returning function) ``node`` of
    ``reader``'s module draws dropout masks, as a phrase for a finding
    (``"`nn.Dropout(config.attn_pdrop)` in `CausalSelfAttention` (model.py,
    line 19)"``); "" when it does not. For a function that does not return a
    model (``builds_model`` false): a functional dropout it calls itself
    (``def noisy(x): return F.dropout(x, 0.1)``, which a ``forward`` may call)."""
    from .project_draws import class_methods

    if isinstance(node, ast.ClassDef):
        methods = list(class_methods(node).values())
        forward = _forward_methods(methods)
        owner = node.name
    elif builds_model:
        methods, forward, owner = [node], [], node.name
    else:
        methods, forward, owner = [node], [node], node.name
    calls = sorted(
        (
            (n, method in forward)
            for method in methods
            for n in _method_nodes(method)
            if isinstance(n, ast.Call)
        ),
        key=lambda c: (c[0].lineno, c[0].col_offset),
    )
    for call, in_forward in calls:
        name = reader._dotted(call.func)
        functional = name in DROPOUT_FUNCTIONS
        if (name in DROPOUT_LAYERS or (functional and in_forward)) and not _disabled(
            call, functional
        ):
            return f"`{_code(call)}` in `{owner}` ({reader.file}, line {call.lineno})"
    if not builds_model and not isinstance(node, ast.ClassDef):
        return ""  # a plain function: its own calls only
    inner = [(call.func, in_forward) for call, in_forward in calls]
    if isinstance(node, ast.ClassDef):
        inner = [*((base, False) for base in node.bases), *inner]
    for expr, in_forward in inner:
        target = reader.resolve(expr)
        if not isinstance(target, tuple) or not target[1]:
            continue
        fact = reader._follow(target)
        if fact is None or not fact.stochastic:
            continue
        # a class or a model it builds; a plain function only where forward runs it
        if fact.kind == "class" or fact.returns == "model" or in_forward:
            return fact.stochastic
    return ""


def _method_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``function``'s body and of the functions nested in it, not of
    classes in it: PyTorch-GAN's ``def discriminator_block(...)`` inside
    ``__init__`` builds the layers (``nn.Dropout2d(0.25)``) that ``__init__``
    assembles, so its calls are the method's."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, ast.ClassDef):
            stack.extend(ast.iter_child_nodes(node))


def _forward_methods(
    methods: list[ast.FunctionDef | ast.AsyncFunctionDef],
) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """``forward`` and the methods it calls on ``self``, transitively."""
    from .method_closure import closure
    from .project_draws import self_calls

    return closure("forward", {m.name: m for m in methods}, self_calls)


def _disabled(call: ast.Call, functional: bool) -> bool:
    """``nn.Dropout(0)``, ``F.dropout(x, 0.0)``, ``F.dropout(x, training=False)``."""
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    index = 1 if functional else 0
    p = keywords.get("p")
    if p is None and len(call.args) > index:
        p = call.args[index]
    if (
        isinstance(p, ast.Constant)
        and isinstance(p.value, int | float)
        and not isinstance(p.value, bool)
        and float(p.value) == 0.0
    ):
        return True
    training = keywords.get("training")
    if training is None and functional and len(call.args) > 2:
        training = call.args[2]
    return isinstance(training, ast.Constant) and training.value is False


def _code(call: ast.Call) -> str:
    text = ast.unparse(call)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
