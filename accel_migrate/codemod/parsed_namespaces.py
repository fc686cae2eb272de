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
    args = cfg = parser.parse_args()     # bound to two names: cfg.local_rank
    cfg = copy.deepcopy(args)            # a copy: cfg.local_rank
    opt = dict(vars(args))               # a copy of its dict: opt.get("local_rank")
    run = functools.partial(train, opt=args)  # handed by a partial's argument
    train(*[args])                       # a starred list or tuple display
    get = lambda: args; train(get())     # what a lambda returns
    cfg = {"args": args}                 # kept in a dict: cfg["args"].local_rank
    opt = dict(vars(args), out="m.pt")   # a copy of its dict with more keys

``ParsedNamespaces`` lists the variables (``Key``) that hold a parsed
namespace, with the nodes that bind them (the assignment, or for a parameter
its function): those bound to ``<parser>.parse_args()`` (or a local function
that returns it), to another such variable, to a call given ``**vars(ns)``
(``SimpleNamespace``, ``argparse.Namespace``, a dataclass) or to
``copy.copy``/``copy.deepcopy`` of one, each target of a chained assignment,
the parameters of local functions that a call of this module (or the
arguments of a ``functools.partial`` of one) passes one, wherever the call is
(a statement, an ``if``'s test, a ``for``'s iterable, a ``with`` item), and
the parameters another file of the batch hands one (``project_namespaces``).
An item of a dict, list or tuple with a namespace among its values
(``containers``) is taken for the namespace. It lists the
variables that hold a namespace's dict (``vars(ns)``, ``ns.__dict__``, a copy:
``dict(d)``, ``dict(d, extra=1)``, ``dict(**d)``, ``{**d, ...}``, ``d | {...}``,
``d.copy()``, and the ``**kw`` of a local function called with
``**vars(ns)``) the same way; a read of one by the option's name is
``d["local_rank"]`` or ``d.get("local_rank", ...)``. A namespace that leaves the module's local functions (an unknown call, a
return) is not followed; the parameter it comes back as is not one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .index_syntax import assigned_targets, bind_arguments
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import Key, ModuleIndex
    from .rank_local_options import RankLocalOption, RankLocalOptions

#: Rounds of the fixpoint: each round follows one more hand-on (``main(args)``
#: -> ``train(args)`` -> ...) and stops as soon as a round adds nothing; a
#: chain of more hand-ons than this, in an order the rounds meet backwards,
#: is cut there.
_ROUNDS = 64


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
        #: Local functions called with a namespace's dict spread as keywords
        #: (``main(**vars(args))``): each option is the parameter of its name.
        self.spread: set[cst.FunctionDef] = set()
        #: Variables holding a dict, list or tuple with a parsed namespace in
        #: it (``cfg = {"args": args}``): ``cfg["args"]`` is one.
        self.containers: set[Key] = set()
        self._lambdas: set[cst.Lambda] = set()  # lambdas being asked
        self._asking: set[cst.FunctionDef] = set()  # local functions being asked
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
        for function, attributes in self.options.handed.items():
            # `def train(args)` another file of the batch hands its parsed
            # namespace (`project_namespaces`): handed on from here as well
            for attribute in attributes:
                key = index.function_scope_key(function, attribute.split(".")[0])
                bound = self.keys.setdefault(key, [])
                if function not in bound:
                    bound.append(function)
        for _ in range(_ROUNDS):
            before = self._size()
            for statement in assignments:
                value = statement.value  # type: ignore[attr-defined]
                for target in targets(statement):  # `args = cfg = ...`: each
                    key = index.key(target)
                    if key is None:
                        continue
                    if self.holds(value):
                        bound = self.keys.setdefault(key, [])
                        if statement not in bound:
                            bound.append(statement)
                    elif self.holds_dict(value):
                        self.dicts.add(key)
                    elif self.holds_container(value):
                        self.containers.add(key)
            for function in index.functions:
                for call in index.call_sites(function):
                    # (wherever the call is: a statement, an `if`'s test, a
                    # `for`'s iterable, a `with` item, a return)
                    self._hand(function, index.arguments(call), call)
            for call in index.calls:
                # `run = functools.partial(train, opt=args)`: `train` is handed
                # the arguments `run(...)` is called with after these
                handed = _partial(index, call)
                if handed is not None:
                    function, bound, rest = handed
                    passed = bind_arguments(function, bound, rest)
                    self._hand(
                        function,
                        ((index.function_scope_key(function, n), a) for n, a in passed),
                        rest,
                    )
            if self._size() == before:
                break

    def _size(self) -> tuple[int, ...]:
        found = sum(len(v) for v in self.keys.values())
        return (found, len(self.dicts), len(self.spread), len(self.containers))

    def _hand(
        self,
        function: cst.FunctionDef,
        passed: Iterable[tuple[Key, cst.BaseExpression]],
        call: cst.Call,
    ) -> None:
        """``function`` called as ``call``, its parameters given ``passed``."""
        if any(a.star == "**" and self.holds_dict(a.value) for a in call.args):
            self.spread.add(function)  # `main(**vars(args))`
            kwargs = function.params.star_kwarg
            if isinstance(kwargs, cst.Param):  # `def main(**kw)`: kw["local_rank"]
                self.dicts.add(
                    self.index.function_scope_key(function, kwargs.name.value)
                )
        for key, arg in passed:
            if self.holds(arg):
                bound = self.keys.setdefault(key, [])
                if function not in bound:
                    bound.append(function)
            elif self.holds_dict(arg):
                self.dicts.add(key)  # `main(vars(args))`
            elif self.holds_container(arg):
                self.containers.add(key)  # `main({"args": args})`

    def holds(self, expr: cst.BaseExpression) -> bool:
        """Is ``expr`` a parsed namespace: a ``parse_args()`` call (or of a
        local function returning one), a variable holding one, or a call given
        its attributes (``SimpleNamespace(**vars(args))``)?"""
        from .rank_local_options import PARSE_METHODS

        index = self.index
        if isinstance(expr, (cst.Name, cst.Attribute)):
            key = index.key(expr)
            return key is not None and key in self.keys
        if isinstance(expr, cst.Subscript):
            return self.holds_container(expr.value)  # `cfg["args"]`
        if not isinstance(expr, cst.Call):
            return False
        func = expr.func
        if any(self._lambda_holds(f) for f in self._lambdas_of(func)):
            return True  # `get = lambda: args` ... `get()`
        if isinstance(func, cst.Attribute) and func.attr.value in PARSE_METHODS:
            return func.attr.value != "parse_known_args"  # that one: a pair
        callee = index.callee(expr)
        if callee is not None and callee[0] in self.options.parsers:
            return self.options.parsers[callee[0]] != "parse_known_args"
        if _copied(index, expr):
            return self.holds(expr.args[0].value)  # `copy.deepcopy(args)`
        if _called(expr) == "dict" and "builtins.dict" in index.qualnames(func):
            return False  # `dict(**vars(args))`: a dict (``holds_dict``)
        if callee is not None and callee[0] not in self._asking:
            # `cfg = build_config()` returning `SimpleNamespace(**vars(args))`
            self._asking.add(callee[0])
            try:
                if any(self.holds(v) for v in _returns(index, callee[0])):
                    return True
            finally:
                self._asking.discard(callee[0])
        return any(arg.star == "**" and self.holds_dict(arg.value) for arg in expr.args)

    def _lambdas_of(self, func: cst.BaseExpression) -> list[cst.Lambda]:
        """The lambdas a call's function is: itself, or a variable's values."""
        if isinstance(func, cst.Lambda):
            return [func]
        if not isinstance(func, cst.Name):
            return []
        key = self.index.key(func)
        values = self.options.values.get(key, ()) if key is not None else ()
        return [v for v in values if isinstance(v, cst.Lambda)]

    def _lambda_holds(self, function: cst.Lambda) -> bool:
        if function in self._lambdas:
            return False
        self._lambdas.add(function)
        try:
            return self.holds(function.body)
        finally:
            self._lambdas.discard(function)

    def holds_container(self, expr: cst.BaseExpression) -> bool:
        """Is ``expr`` a dict, list or tuple with a parsed namespace among its
        values (``{"args": args}``, ``dict(args=args)``, ``[args]``), or a
        variable holding one? Any item of it is taken to be the namespace."""
        if isinstance(expr, cst.Dict):
            return any(
                isinstance(e, cst.DictElement) and self.holds(e.value)
                for e in expr.elements
            )
        if isinstance(expr, (cst.List, cst.Tuple)):
            return any(
                not isinstance(e, cst.StarredElement) and self.holds(e.value)
                for e in expr.elements
            )
        if isinstance(expr, cst.Call):
            return (
                _called(expr) == "dict"
                and "builtins.dict" in self.index.qualnames(expr.func)
                and any(
                    a.keyword is not None and self.holds(a.value) for a in expr.args
                )
            )
        if isinstance(expr, cst.Name):
            key = self.index.key(expr)
            return key is not None and key in self.containers
        return False

    def holds_dict(self, expr: cst.BaseExpression) -> bool:
        """Is ``expr`` a parsed namespace's dict: ``vars(ns)``, ``ns.__dict__``,
        a copy of one (``dict(d, extra=1)``, ``dict(**d)``, ``{**d, ...}``,
        ``d | {...}``) or a variable holding one?"""
        if isinstance(expr, cst.Dict):
            return any(
                isinstance(e, cst.StarredDictElement) and self.holds_dict(e.value)
                for e in expr.elements
            )
        if isinstance(expr, cst.BinaryOperation) and isinstance(
            expr.operator, cst.BitOr
        ):
            return self.holds_dict(expr.left) or self.holds_dict(expr.right)
        if isinstance(expr, cst.Call):
            func = expr.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value == "copy"
                and not expr.args
            ):
                return self.holds_dict(func.value)  # `vars(args).copy()`
            if _copied(index := self.index, expr):
                return self.holds_dict(expr.args[0].value)  # `copy.copy(d)`
            if (
                isinstance(func, cst.Name)
                and func.value == "dict"
                and "builtins.dict" in index.qualnames(func)
                and expr.args
            ):
                # `dict(vars(args))`, `dict(vars(args), extra=1)`, `dict(**d)`
                first = expr.args[0]
                if first.keyword is None and not first.star:
                    return self.holds_dict(first.value)
                return any(
                    a.star == "**" and self.holds_dict(a.value) for a in expr.args
                )
            return (
                isinstance(func, cst.Name)
                and func.value == "vars"
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

    def item(self, node: cst.Subscript | cst.Call) -> str | None:
        """The attribute a read of a namespace's dict by a literal key names
        (``opt["local_rank"]``, ``opt.get("local_rank", -1)``), or None."""
        if isinstance(node, cst.Call):
            func = node.func
            if (
                not isinstance(func, cst.Attribute)
                or func.attr.value != "get"
                or not node.args
                or node.args[0].star
                or node.args[0].keyword is not None
            ):
                return None
            key, holder = node.args[0].value, func.value
        else:
            if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
                return None
            key, holder = node.slice[0].slice.value, node.value
        if not isinstance(key, cst.SimpleString):
            return None
        text = key.evaluated_value
        if not isinstance(text, str) or not self.holds_dict(holder):
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


def targets(statement: cst.CSTNode) -> list[cst.BaseExpression]:
    """The Names and attributes an assignment binds its value to: each of
    ``args = cfg = parser.parse_args()``."""
    if isinstance(statement, cst.AugAssign):
        return []
    found = assigned_targets(statement)
    return [t for t in found if isinstance(t, (cst.Name, cst.Attribute))]


def _partial(
    index: ModuleIndex, call: cst.Call
) -> tuple[cst.FunctionDef, int, cst.Call] | None:
    """``functools.partial(train, opt=args)`` of a local function: the
    function, the parameters it binds itself (1 for a method) and the call
    of it the partial's own arguments make (``train(opt=args)``)."""
    if not call.args or call.args[0].star or call.args[0].keyword is not None:
        return None
    if _called(call) != "partial" or "functools.partial" not in index.qualnames(
        call.func
    ):
        return None
    func = call.args[0].value
    function = index.local_function(func)
    if function is None:
        return None
    bound = 1 if isinstance(func, cst.Attribute) else 0
    return function, bound, call.with_changes(func=func, args=call.args[1:])


def _called(call: cst.Call) -> str | None:
    """The name a call is spelled with: ``partial`` of ``functools.partial``."""
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else None


def _copied(index: ModuleIndex, call: cst.Call) -> bool:
    """Is ``call`` ``copy.copy(x)`` or ``copy.deepcopy(x)`` (a copy of the
    same kind, with the same attributes or items)?"""
    return (
        _called(call) in ("copy", "deepcopy")
        and len(call.args) == 1
        and not call.args[0].star
        and call.args[0].keyword is None
        and bool(index.qualnames(call.func) & {"copy.copy", "copy.deepcopy"})
    )


def _returns(index: ModuleIndex, function: cst.FunctionDef) -> list[cst.BaseExpression]:
    """The values ``function``'s own ``return`` statements give."""
    return [
        ret.value  # type: ignore[attr-defined]
        for ret in findall(function.body, m.Return())
        if ret.value is not None  # type: ignore[attr-defined]
        and index.enclosing_function(ret) is function
    ]


def handed_on(
    index: ModuleIndex,
) -> list[tuple[Key, tuple[str, cst.CSTNode, cst.CSTNode]]]:
    """The provenance's definitions (``rank_local_sources``) of the rank-local
    attributes of the namespaces handed on (``def main(args)`` called as
    ``main(parser.parse_args())``, ``cfg = SimpleNamespace(**vars(args))``,
    ``main(**vars(args))``): ("option", the default, what binds the
    namespace) for each option, ("value", the value, the same) for each rank
    variable the module stores into a namespace (``args.local_rank =
    env_rank()``)."""
    options = index.rank_local_options
    found: list[tuple[Key, tuple[str, cst.CSTNode, cst.CSTNode]]] = []
    for function in options.namespaces.spread:
        for dest, parsed in options.options.items():
            key = index.function_scope_key(function, dest)
            if key[0] is not None:  # a parameter of that name
                found.extend((key, ("option", o.default, function)) for o in parsed)
    for base, anchors in options.namespaces.keys.items():
        for anchor in anchors:
            own = options.namespace(anchor)
            if own is not None and index.key(own) == base:
                continue  # `args = parser.parse_args()`: the provenance's own
            for dest, parsed in options.options.items():
                key = (base[0], f"{base[1]}.{dest}")
                found.extend((key, ("option", o.default, anchor)) for o in parsed)
            for target, value in options.stores:
                key = (base[0], f"{base[1]}.{target.attr.value}")
                found.append((key, ("value", value, anchor)))
    return found


def option_items(
    index: ModuleIndex, expr: cst.CSTNode
) -> list[tuple[cst.BaseExpression, RankLocalOption]]:
    """The reads of a namespace's dict by a rank-local option's name in
    ``expr`` (``opt["local_rank"]``, ``opt.get("local_rank")``), of the
    namespace by ``getattr(opt, "local_rank", -1)``, and of a namespace no
    variable names (``cfg["args"].local_rank``), with the option."""
    options = index.rank_local_options
    found: list[tuple[cst.BaseExpression, RankLocalOption]] = []
    if not options.options:
        return found
    get = m.Call(func=m.Attribute(attr=m.Name("get")))
    reads = m.Subscript() | m.Call(func=m.Name("getattr")) | get
    for read in findall(expr, reads | m.Attribute(attr=m.Name())):
        if isinstance(read, cst.Attribute):
            dest = options.item(read) if read.attr.value in options.options else None
        elif not isinstance(read, cst.Call) or m.matches(read, get):
            dest = options.item(read)  # type: ignore[arg-type]
        else:
            dest = _getattr_name(options.namespaces, read)  # type: ignore[arg-type]
        for option in options.options.get(dest or "", ()):
            found.append((read, option))  # type: ignore[arg-type]
    return found


def _getattr_name(namespaces: ParsedNamespaces, call: cst.Call) -> str | None:
    """``local_rank`` of ``getattr(opt, "local_rank", -1)`` where ``opt`` holds
    a parsed namespace, else None."""
    if len(call.args) < 2 or call.args[0].star or call.args[1].star:
        return None
    name = call.args[1].value
    if not isinstance(name, cst.SimpleString):
        return None
    text = name.evaluated_value
    if not isinstance(text, str) or not namespaces.holds(call.args[0].value):
        return None
    return text
