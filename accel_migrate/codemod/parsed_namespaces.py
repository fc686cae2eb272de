"""Where a parsed command-line namespace travels in a module.

``rank_local_options`` finds the options whose default differs between
processes (``--local_rank`` defaulting to ``LOCAL_RANK``); their attribute is
rank-local on every namespace that carries them, not only on the variable
``parser.parse_args()`` is first bound to. Real scripts hand the namespace on::

    def main(args):                      # a parameter: main(parser.parse_args())
        train(args, model, loader)       # and on again to a helper
    cfg = SimpleNamespace(**vars(args))  # an object built from it: cfg.local_rank
    opt = vars(args)                     # its dict: opt["local_rank"]
    self.args = args                     # kept by an object: self.args.local_rank

``ParsedNamespaces`` lists the variables (``Key``) that hold a parsed
namespace, with the nodes that bind them (the assignment, or for a parameter
its function): those bound to ``<parser>.parse_args()`` (or a local function
that returns it), to another such variable, to a call given ``**vars(ns)``
(``SimpleNamespace``, ``argparse.Namespace``, a dataclass), and the parameters
of local functions that a call of this module passes one. It lists the
variables that hold a namespace's dict (``vars(ns)``, ``ns.__dict__``) the same
way. A namespace that leaves the module's local functions (an unknown call, a
return) is not followed; the parameter it comes back as is not one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import Key, ModuleIndex
    from .rank_local_options import RankLocalOptions

_ROUNDS = 6  # hand-ons followed (main(args) -> train(args) -> ...)


class ParsedNamespaces:
    """The namespace- and dict-holding variables of one module
    (``RankLocalOptions.namespaces``)."""

    def __init__(self, options: RankLocalOptions) -> None:
        self.options = options
        self.index: ModuleIndex = options.index
        #: Variables holding a parsed namespace, with what binds them.
        self.keys: dict[Key, list[cst.CSTNode]] = {}
        #: Variables holding a parsed namespace's dict (``vars(args)``).
        self.dicts: set[Key] = set()
        self._collect()

    def _collect(self) -> None:
        index = self.index
        assignments = [
            s
            for s in findall(index.module, m.Assign() | m.AnnAssign())
            if getattr(s, "value", None) is not None
        ]
        for statement in assignments:
            target = self.options.namespace(statement)
            key = index.key(target) if target is not None else None
            if key is not None:
                self.keys.setdefault(key, []).append(statement)
        for _ in range(_ROUNDS):
            before = (sum(len(v) for v in self.keys.values()), len(self.dicts))
            for statement in assignments:
                target = _single_target(statement)
                key = index.key(target) if target is not None else None
                if key is None:
                    continue
                value = statement.value  # type: ignore[attr-defined]
                if self.holds(value):
                    bound = self.keys.setdefault(key, [])
                    if statement not in bound:
                        bound.append(statement)
                elif self.holds_dict(value):
                    self.dicts.add(key)
            for function in index.functions:
                for call in index.call_sites(function):
                    for key, arg in index.arguments(call):
                        if self.holds(arg):
                            bound = self.keys.setdefault(key, [])
                            if function not in bound:
                                bound.append(function)
            if (sum(len(v) for v in self.keys.values()), len(self.dicts)) == before:
                break

    def holds(self, expr: cst.BaseExpression) -> bool:
        """Is ``expr`` a parsed namespace: a ``parse_args()`` call (or of a
        local function returning one), a variable holding one, or a call given
        its attributes (``SimpleNamespace(**vars(args))``)?"""
        from .rank_local_options import PARSE_METHODS

        index = self.index
        if isinstance(expr, (cst.Name, cst.Attribute)):
            key = index.key(expr)
            return key is not None and key in self.keys
        if not isinstance(expr, cst.Call):
            return False
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in PARSE_METHODS:
            return func.attr.value != "parse_known_args"  # that one: a pair
        callee = index.callee(expr)
        if callee is not None and callee[0] in self.options.parsers:
            return self.options.parsers[callee[0]] != "parse_known_args"
        return any(
            arg.star == "**" and self.holds_dict(arg.value) for arg in expr.args
        )

    def holds_dict(self, expr: cst.BaseExpression) -> bool:
        """Is ``expr`` a parsed namespace's dict: ``vars(ns)``, ``ns.__dict__``
        or a variable holding one?"""
        if isinstance(expr, cst.Call):
            return (
                isinstance(expr.func, cst.Name)
                and expr.func.value == "vars"
                and len(expr.args) == 1
                and not expr.args[0].star
                and self.holds(expr.args[0].value)
            )
        if isinstance(expr, cst.Attribute) and expr.attr.value == "__dict__":
            return self.holds(expr.value)
        if isinstance(expr, cst.Name):
            key = self.index.key(expr)
            return key is not None and key in self.dicts
        return False

    def item(self, node: cst.Subscript) -> str | None:
        """The attribute a read of a namespace's dict by a literal key names
        (``opt["local_rank"]``), or None."""
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return None
        key = node.slice[0].slice.value
        if not isinstance(key, cst.SimpleString):
            return None
        text = key.evaluated_value
        if not isinstance(text, str) or not self.holds_dict(node.value):
            return None
        return text

    def parameters(self, function: cst.FunctionDef) -> list[str]:
        """The parameters of ``function`` that a call of this module passes a
        parsed namespace."""
        found = []
        params = function.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            name = param.name.value
            if self.index.function_scope_key(function, name) in self.keys:
                found.append(name)
        return found


def _single_target(statement: cst.CSTNode) -> cst.BaseExpression | None:
    """The one Name or attribute an assignment binds, else None."""
    if isinstance(statement, cst.Assign):
        if len(statement.targets) != 1:
            return None
        target = statement.targets[0].target
    elif isinstance(statement, cst.AnnAssign):
        target = statement.target
    else:
        return None
    return target if isinstance(target, (cst.Name, cst.Attribute)) else None
