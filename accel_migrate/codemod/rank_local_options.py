"""Command-line options whose default differs between processes.

A script half-written for DDP often takes its local rank as an option whose
default is the launcher's variable::

    parser.add_argument("--local_rank", type=int,
                        default=int(os.environ.get("LOCAL_RANK", -1)))
    args = parser.parse_args()
    ...
    if args.local_rank in (-1, 0):
        torch.save(model.state_dict(), "m.pt")

``accel-migrate launch`` starts the script with torchrun, which passes no
``--local_rank`` (it sets ``LOCAL_RANK`` in the environment instead), so the
option takes its default on every process: ``args.local_rank`` is as rank-local
as the variable it is read from. An option whose default is a plain value
(``default=-1``) is the same on every process, and so is one the user passes.

``RankLocalOptions`` lists the options of a module whose ``default=`` reads a
variable the launcher sets per process (``rank_local_calls.
rank_environment_read``), directly, through a local name (``local_rank =
int(os.environ["LOCAL_RANK"])`` ... ``default=local_rank``) or through what a
local function returns (``default=env_rank()``), by the attribute they are
parsed to (their ``dest``); a parser's ``set_defaults(local_rank=<read>)``
declares one too, and ``torch.distributed.get_rank()`` counts as such a read.
The later of the two wins, as in argparse: ``set_defaults(local_rank=-1)``
after ``add_argument(..., default=<read>)`` in the same block clears the
option, and an ``add_argument(..., default=-1)`` after a reading
``set_defaults`` keeps its own default (``_overridden``). The divergence analysis makes ``args.X`` rank-local where
``args = <parser>.parse_args()`` binds a namespace with such an option ``X``,
and wherever the module hands that namespace on (``parsed_namespaces``): a
parameter of a local function a call passes it (``def main(args)`` ...
``main(parser.parse_args())``, ``train(args, model)``), a variable or
attribute bound to it (``self.args = args``, ``args = cfg = ...``), a copy
(``copy.deepcopy(args)``), an object built from its dict
(``SimpleNamespace(**vars(args))``), a parameter a ``functools.partial`` of a
local function binds, a read of its dict or a copy of it by the option's name
(``vars(args)["local_rank"]``, ``dict(vars(args)).get("local_rank")``), and
the parameter of that name (or the ``**kw``) of a local function called with
``**vars(args)``. On a namespace handed on, an attribute
the module stores a rank variable into (``args.local_rank = env_rank()``) is
rank-local too (``attributes``). The provenance (``rank_local_sources``)
follows ``args.X`` back to the default. Any parser of the module counts (the
analysis errs towards rank-dependent). A namespace that goes through a call
this module does not define and comes back is not followed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .analysis import attr_chain
from .index_syntax import assigned_targets
from .parsed_namespaces import ParsedNamespaces, _returns, _single_target, targets
from .project_namespaces import HandedOption, handed_parameters
from .rank_local_calls import rank_environment_read, rank_query
from .subtrees import findall
from .unseen_namespaces import assumed

if TYPE_CHECKING:
    from .analysis import Key, ModuleIndex

#: The methods of an ``argparse.ArgumentParser`` that return the parsed
#: namespace (``parse_known_args``: as the first of a pair).
PARSE_METHODS = frozenset({"parse_args", "parse_known_args", "parse_intermixed_args"})
_HOPS = 32  # names followed from a default back to a rank variable


@dataclass(frozen=True)
class RankLocalOption:
    dest: str  # the namespace's attribute: "local_rank"
    flag: str  # how the option is spelled: "--local_rank"
    default: cst.BaseExpression  # the ``default=`` expression
    call: cst.Call  # the ``add_argument`` call


class RankLocalOptions:
    """The rank-local options of one module (``ModuleIndex.rank_local_options``)."""

    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self._values: dict[Key, list[cst.BaseExpression]] | None = None
        self._parsers: dict[cst.FunctionDef, str] | None = None
        self._namespaces: ParsedNamespaces | None = None
        self._attributes: frozenset[str] | None = None
        self._handed: (
            dict[cst.FunctionDef, dict[str, tuple[HandedOption, ...]]] | None
        ) = None
        self.options: dict[str, list[RankLocalOption]] = {}
        #: Options ``set_defaults`` also gives a value that reads no rank
        #: variable: which default the namespace gets is not read here.
        self.reset: set[str] = set()
        for call in index.calls:
            for option in self._option(call):
                if not self._overridden(option):
                    self.options.setdefault(option.dest, []).append(option)
        #: The attributes of a parsed namespace that differ between processes.
        self.dests: frozenset[str] = frozenset(self.options)

    def _option(self, call: cst.Call) -> list[RankLocalOption]:
        """The rank-local options ``call`` declares: ``add_argument(...,
        default=<read>)``, or each keyword of ``set_defaults(local_rank=<read>)``
        (a parser's defaults override its arguments')."""
        func = call.func
        if not isinstance(func, cst.Attribute):
            return []
        if func.attr.value == "add_argument":
            option = self._argument(call)
            return [] if option is None else [option]
        if func.attr.value != "set_defaults":
            return []
        found = []
        for arg in call.args:
            if arg.keyword is None:
                continue
            dest = arg.keyword.value
            if not self._rank_local(arg.value):
                self.reset.add(dest)
                continue
            flag = next(
                (
                    named[1]
                    for other in self.index.calls
                    if isinstance(other.func, cst.Attribute)
                    and other.func.attr.value == "add_argument"
                    and (named := _option_dest(other)) is not None
                    and named[0] == dest
                ),
                dest,
            )
            found.append(RankLocalOption(dest, flag, arg.value, call))
        return found

    def _overridden(self, option: RankLocalOption) -> bool:
        """Does a later statement of the same block give the option a plain
        default on the same parser? ``set_defaults(local_rank=-1)`` after
        ``add_argument("--local_rank", default=<read>)`` replaces the
        argument's default (argparse's ``set_defaults`` updates the actions it
        names); ``add_argument(..., default=-1)`` after ``set_defaults(
        local_rank=<read>)`` keeps its own default. The other orders keep the
        read, and so does an override in another block (it may not run)."""
        statement = _statement_of(self.index, option.call)
        parser = option.call.func.value  # type: ignore[attr-defined]
        block = None if statement is None else self.index.parent(statement)
        body = getattr(block, "body", ())
        if statement is None or not isinstance(body, (list, tuple)):
            return False
        for later in body[body.index(statement) + 1 :]:
            for call in findall(later, m.Call(func=m.Attribute())):
                assert isinstance(call, cst.Call)
                func = call.func
                if (
                    _statement_of(self.index, call) is not later
                    or not isinstance(func, cst.Attribute)
                    or not func.value.deep_equals(parser)
                ):
                    continue
                for dest, value in _defaults(call, func.attr.value):
                    if dest == option.dest and not self._rank_local(value):
                        return True
        return False

    def _argument(self, call: cst.Call) -> RankLocalOption | None:
        default = next(
            (a.value for a in call.args if a.keyword and a.keyword.value == "default"),
            None,
        )
        if default is None or not self._rank_local(default):
            return None
        named = _option_dest(call)
        if named is None:
            return None
        return RankLocalOption(named[0], named[1], default, call)

    def _rank_local(self, expr: cst.CSTNode, environment: bool = True) -> bool:
        """Does ``expr`` read a rank variable (or ask ``torch.distributed.
        get_rank()``), itself, through the values of the local names it reads
        or through what the local functions it calls return
        (``default=env_rank()``)? ``environment=False``: the query only."""
        index = self.index
        pending = [expr]
        seen: set[Key] = set()
        called: set[cst.FunctionDef] = set()
        for _ in range(_HOPS):
            if not pending:
                return False
            names: list[cst.Name] = []
            returned: list[cst.BaseExpression] = []
            for node in pending:
                reads = findall(node, m.Call() | m.Subscript())
                if any(
                    (environment and rank_environment_read(index, n))
                    or rank_query(index, n)
                    for n in reads
                ):
                    return True
                names.extend(n for n in findall(node, m.Name()))  # type: ignore[misc]
                for call in reads:
                    callee = index.callee(call) if isinstance(call, cst.Call) else None
                    if callee is None or callee[0] in called:
                        continue
                    called.add(callee[0])
                    returned.extend(_returns(index, callee[0]))
            pending = returned
            for name in names:
                key = index.key(name)
                if key is None or key in seen:
                    continue
                seen.add(key)
                pending.extend(self.values.get(key, ()))
        return False

    def bound(self, node: cst.CSTNode) -> frozenset[str]:
        """The rank-local attributes an assignment of a parsed namespace binds:
        ``{"args.local_rank"}`` for ``args = parser.parse_args()`` where
        ``--local_rank`` is a rank-local option; empty for any other statement."""
        if not self.attributes:
            return frozenset()
        namespace = self.namespace(node)
        found: set[str] = set()
        chain = attr_chain(namespace) if namespace is not None else None
        if chain is not None:
            found.update(f"{chain}.{dest}" for dest in self.dests)
        if isinstance(node, (cst.Assign, cst.AnnAssign)) and node.value is not None:
            # `cfg = SimpleNamespace(**vars(args))`, `self.args = args`, `cfg`
            # of `args = cfg = parser.parse_args()`: the namespace handed on,
            # with what the module stored into it
            handed = [t for t in targets(node) if t is not namespace]
            if handed and self.namespaces.holds(node.value):
                for target in handed:
                    chain = attr_chain(target)
                    if chain is not None:
                        found.update(f"{chain}.{dest}" for dest in self.attributes)
        return frozenset(found)

    def parameters(self, function: cst.FunctionDef) -> frozenset[str]:
        """The rank-local attributes of the namespaces ``function`` is passed:
        ``{"args.local_rank"}`` for ``def main(args)`` called as
        ``main(parser.parse_args())``, and ``{"local_rank"}`` for ``def
        main(local_rank=-1)`` called as ``main(**vars(args))``
        (``parsed_namespaces``); in a batch, ``{"args.local_rank"}`` for ``def
        train(args)`` that another file calls as ``train(parser.parse_args())``
        (``project_namespaces``)."""
        handed = frozenset(self.handed.get(function, ()))
        if not self.attributes:
            return handed
        spread = self.attributes if function in self.namespaces.spread else ()
        named = _all_parameter_names(function)
        return (
            frozenset(
                f"{name}.{dest}"
                for name in self.namespaces.parameters(function)
                for dest in self.attributes
            )
            | frozenset(dest for dest in spread if dest in named)
            | handed
        )

    @property
    def handed(self) -> dict[cst.FunctionDef, dict[str, tuple[HandedOption, ...]]]:
        """The rank-local options of the namespaces the batch's other files
        hand this file's functions, by function and attribute
        (``project_namespaces.handed_parameters``)."""
        if self._handed is None:
            self._handed = handed_parameters(self.index)
            self._handed.update(assumed(self.index, self._handed))  # file mode
        return self._handed

    def item(self, node: cst.Subscript | cst.Call | cst.Attribute) -> str | None:
        """The rank-local attribute a read of a namespace's dict names
        (``vars(args)["local_rank"]``, ``opt["local_rank"]``,
        ``opt.get("local_rank", -1)``), or of a namespace no variable names
        (``cfg["args"].local_rank``, ``get_args().local_rank``), or None."""
        if not self.attributes:
            return None
        if isinstance(node, cst.Attribute):
            dest = node.attr.value
            if dest not in self.attributes or attr_chain(node) is not None:
                return None
            return dest if self.namespaces.holds(node.value) else None
        dest = self.namespaces.item(node)
        return dest if dest in self.attributes else None

    @property
    def namespaces(self) -> ParsedNamespaces:
        """The variables that hold a parsed namespace or its dict."""
        if self._namespaces is None:
            self._namespaces = ParsedNamespaces(self)
        return self._namespaces

    @property
    def attributes(self) -> frozenset[str]:
        """``dests`` and the attributes the module stores a rank variable into
        on a namespace (``args.local_rank = env_rank()``): rank-local on the
        namespaces it is handed on as."""
        if self._attributes is None:
            found = set(self.dests)
            for handed in self.handed.values():  # another file's options
                found.update(attribute.split(".", 1)[1] for attribute in handed)
            if self.parsers or "parse_" in self.index.code:
                stores = self.stores
                for target, value in stores:
                    if self._rank_local(value):
                        found.add(target.attr.value)
                # `args.is_main = args.local_rank in (-1, 0)`: computed from one
                for _ in range(_HOPS):
                    before = len(found)
                    for target, value in stores:
                        if target.attr.value not in found and any(
                            isinstance(read, cst.Attribute)
                            and read.attr.value in found
                            and self.namespaces.holds(read.value)
                            for read in findall(value, m.Attribute())
                        ):
                            found.add(target.attr.value)
                    if len(found) == before:
                        break
            self._attributes = frozenset(found)
        return self._attributes

    @property
    def stores(self) -> list[tuple[cst.Attribute, cst.BaseExpression]]:
        """``ns.x = value`` statements that store into a parsed namespace."""
        found = []
        for statement in findall(self.index.module, m.Assign() | m.AnnAssign()):
            target = _single_target(statement)
            value = getattr(statement, "value", None)
            if (
                isinstance(target, cst.Attribute)
                and value is not None
                and self.namespaces.holds(target.value)
            ):
                found.append((target, value))
        return found

    def namespace(self, node: cst.CSTNode) -> cst.BaseExpression | None:
        """The target an assignment binds a parsed namespace to: ``args`` of
        ``args = parser.parse_args()``, of ``args, rest =
        parser.parse_known_args()`` or of ``args = get_args()`` where the local
        function ``get_args`` returns ``parser.parse_args()``; None for any
        other statement."""
        if not isinstance(node, (cst.Assign, cst.AnnAssign)) or node.value is None:
            return None
        value = node.value
        if not isinstance(value, cst.Call):
            return None
        func = value.func
        if isinstance(func, cst.Attribute) and func.attr.value in PARSE_METHODS:
            method: str | None = func.attr.value
        else:
            callee = self.index.callee(value)
            method = None if callee is None else self.parsers.get(callee[0])
        if method is None:
            return None
        target = node.targets[0].target if isinstance(node, cst.Assign) else node.target
        if method == "parse_known_args":
            if not isinstance(target, (cst.Tuple, cst.List)) or not target.elements:
                return None
            target = target.elements[0].value
        if isinstance(target, (cst.Name, cst.Attribute)):
            return target
        return None

    def from_command_line(self, node: cst.CSTNode | None) -> bool:
        """Is ``node`` an assignment of a namespace (``namespace``) parsed from
        the command line itself: its ``parse_args()`` call, or every one the
        local function returns, given no arguments (not ``parse_args([])``)?"""
        if self.namespace(node) is None:
            return False
        value = node.value  # type: ignore[attr-defined]
        if (
            isinstance(value.func, cst.Attribute)
            and value.func.attr.value in PARSE_METHODS
        ):
            return not value.args
        callee = self.index.callee(value)
        if callee is None:
            return False
        function = callee[0]
        return all(
            not ret.value.args  # type: ignore[attr-defined]
            for ret in findall(function.body, m.Return())
            if isinstance(ret.value, cst.Call)  # type: ignore[attr-defined]
            and self.index.enclosing_function(ret) is function
        )

    def stored(self, dest: str) -> bool:
        """Does a statement of the module store into an attribute named ``dest``
        (``args.local_rank = ...``, ``+=``), or set attributes by name
        (``setattr``, ``vars(args)``, ``__dict__``)?"""
        code = self.index.code
        if dest in self.reset:
            return True
        if "setattr(" in code or "vars(" in code or "__dict__" in code:
            return True
        for statement in findall(
            self.index.module, m.Assign() | m.AugAssign() | m.AnnAssign()
        ):
            targets = assigned_targets(statement)
            for target in targets:
                for leaf in findall(target, m.Attribute()):
                    if leaf.attr.value == dest:  # type: ignore[attr-defined]
                        return True
        return False

    @property
    def parsers(self) -> dict[cst.FunctionDef, str]:
        """The local functions that return a parsed namespace (``return
        parser.parse_args()``), with the method they call."""
        if self._parsers is None:
            found: dict[cst.FunctionDef, str] = {}
            for function in self.index.functions:
                for ret in findall(function.body, m.Return()):
                    value = ret.value  # type: ignore[attr-defined]
                    if (
                        isinstance(value, cst.Call)
                        and isinstance(value.func, cst.Attribute)
                        and value.func.attr.value in PARSE_METHODS
                        and self.index.enclosing_function(ret) is function
                    ):
                        found[function] = value.func.attr.value
            self._parsers = found
        return self._parsers

    @property
    def values(self) -> dict[Key, list[cst.BaseExpression]]:
        """The values plain assignments give each variable."""
        if self._values is None:
            found: dict[Key, list[cst.BaseExpression]] = {}
            for statement in findall(self.index.module, m.Assign() | m.AnnAssign()):
                value = getattr(statement, "value", None)
                if value is None:
                    continue
                targets = assigned_targets(statement)
                for target in targets:
                    if isinstance(target, cst.Name):
                        key = self.index.key(target)
                        if key is not None:
                            found.setdefault(key, []).append(value)
            self._values = found
        return self._values


def _option_dest(call: cst.Call) -> tuple[str, str] | None:
    """(dest, flag) of ``add_argument("--local-rank", ...)``: argparse's
    ``dest=``, else the first long option (dashes made underscores), else the
    first short one, else a positional's name."""
    flags: list[str] = []
    dest = None
    for arg in call.args:
        if arg.keyword is None and isinstance(arg.value, cst.SimpleString):
            text = arg.value.evaluated_value
            if isinstance(text, str):
                flags.append(text)
        elif arg.keyword is not None and arg.keyword.value == "dest":
            if not isinstance(arg.value, cst.SimpleString):
                return None
            text = arg.value.evaluated_value
            dest = text if isinstance(text, str) else None
    if not flags:
        return None
    long = [f for f in flags if f.startswith("--")]
    flag = long[0] if long else flags[0]
    if dest is None:
        dest = flag.lstrip("-").replace("-", "_")
    return (dest, flag) if dest.isidentifier() else None


def _statement_of(index: ModuleIndex, call: cst.Call) -> cst.CSTNode | None:
    """The statement line a call is the whole expression statement of."""
    parent = index.parent(call)
    if not isinstance(parent, cst.Expr):
        return None
    line = index.parent(parent)
    return line if isinstance(line, cst.SimpleStatementLine) else None


def _defaults(call: cst.Call, method: str) -> list[tuple[str, cst.BaseExpression]]:
    """The (dest, default) pairs ``add_argument(..., default=v)`` or
    ``set_defaults(dest=v, ...)`` gives."""
    if method == "set_defaults":
        return [(a.keyword.value, a.value) for a in call.args if a.keyword is not None]
    if method != "add_argument":
        return []
    default = next(
        (a.value for a in call.args if a.keyword and a.keyword.value == "default"),
        None,
    )
    named = _option_dest(call)
    return [] if default is None or named is None else [(named[0], default)]


def _all_parameter_names(function: cst.FunctionDef) -> set[str]:
    params = function.params
    found = (*params.posonly_params, *params.params, *params.kwonly_params)
    return {p.name.value for p in found}
