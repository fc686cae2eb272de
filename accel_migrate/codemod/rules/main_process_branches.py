"""AM047 main-process-branches: a DDP-ready script's ``if rank == 0:`` asks the runtime.

## What
A branch whose test chooses the main process by the launcher's rank variable
(``main_process_tests``): ``if int(os.environ.get("RANK", 0)) == 0:``, ``if
os.getenv("LOCAL_RANK", "0") == "0":``, ``if not rank:`` over ``rank =
int(os.environ["RANK"])``, ``local_rank in (-1, 0)`` over ``local_rank =
int(os.environ.get("LOCAL_RANK", -1))`` or ``args.local_rank in (-1, 0)``
over ``args = parser.parse_args()`` where ``--local_rank``'s default is such a
read (``rank_local_options``), or ``dist.get_rank() == 0`` (``not
torch.distributed.get_rank()``: the runtime starts the process group with
torchrun's ``RANK``) in a file that starts no process group itself, or the
same through the file's own dist-aware helpers (``if is_main_process():``
whose body is ``return get_rank() == 0``, and ``get_rank()`` returning
``dist.get_rank()`` where ``dist.is_initialized()`` and 0 elsewhere:
``rank_helpers``), gets the
runtime's test:
``accel.is_main_process()`` for ``RANK``, ``accel.is_local_main_process()``
(the first process of each machine) for ``LOCAL_RANK``. Only where everything
under it is output the main process alone makes, after the other rules'
rewrites:

- ``print`` / ``accel.print``, ``logging`` calls and a logger from
  ``logging.getLogger``;
- ``accel.save`` of something that is not a state dict (``torch.save(args,
  ...)``, a dict of floats), ``os.makedirs`` / ``os.mkdir``, a call AM017 put
  on the main process (``accel.on_main_process(...)``), and the methods of an
  object it made there (a ``SummaryWriter``'s ``add_scalar``);
- names assigned under the branch and read nowhere else, ``if``s and ``for``s
  made of the same;

and where the arguments call nothing but pure built-ins, ``os.path``, the
clock, ``json.dumps``, and pure methods (``.item()``, ``.format()``,
``.join()``): not a method of the same name that a class of the file defines,
nor one of an object a function or class of the script or its project made
(``tally = new_tally()`` then ``print(tally.mean())``: its method may be the
script's own). No ``else``. A save whose file the script reads again after it
(``torch.load("schedule.pt")`` below the branch) is not output only: the
branch is left as it is (AM028 reports it).

Anything else leaves the branch as it is, and AM028 reports it: a state dict
under it (under FSDP it is gathered by a collective every process must
join), a collective (a loss logged through ``accel.global_loss``), a call of
the script's own functions, a random draw, an assignment read after it, a
read of a prepared model's parameters, buffers or forward (``print("weight",
float(model.weight[0, 0]))``, ``model.fc.bias.tolist()``, ``model(x)``:
``model_reads``; under FSDP the parameters are sharded and the read gathers
them by a collective). ``print(model)`` is output only: a module's ``repr``
prints its structure, no parameter value.

## Why
The migrated script runs under ``accel-migrate launch`` (torchrun), which
sets ``RANK`` and ``LOCAL_RANK`` for every process, and the runtime reads the
same variables: the test already runs its branch on the main process only.
AM028 cannot tell that from a test on a value that differs between processes
in general, so it would leave the whole file unmigrated. With the runtime's
test the branch says what it means, and the decision it takes is the
runtime's: the other rules and AM028 see a branch on the main process.

## Example
```python
# before
if int(os.environ.get("RANK", 0)) == 0:
    os.makedirs(args.out, exist_ok=True)
    torch.save({"epoch": epoch, "loss": avg}, os.path.join(args.out, "meta.pt"))
# after
if accel.is_main_process():
    os.makedirs(args.out, exist_ok=True)
    accel.save({"epoch": epoch, "loss": avg}, os.path.join(args.out, "meta.pt"))
```

## Fix safety
Safe: under the launcher the test is true on exactly the process where
``RANK`` (``LOCAL_RANK``) is 0, which is where the runtime's is; run as one
process the variable is unset and the test passes (its default is 0), as the
runtime's does. A test whose default fails it (``os.environ.get("RANK") ==
"0"``, false without a launcher) is not rewritten, nor one in a file that sets
the variable itself (``os.environ["RANK"] = ...``). An option read as its
default (``args.local_rank``) is one only where nothing else sets it: torchrun
passes no ``--local_rank``, the namespace is parsed from the command line
(``parse_args()`` given no list), and the file stores nothing into the
attribute (no ``args.local_rank = ...``, ``setattr``, ``vars(args)``); with a
``type=``, the default must be converted already (``int(...)``), as argparse
converts a string default. A user who passes ``--local_rank`` to the launched
script chooses the processes by hand, and the branch then runs on each
machine's first process instead. The body runs on the same
process as before and only makes output no other process reads: nothing
collective, no training state, no value the rest of the script reads.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst
import libcst.matchers as m

from ..file_reads import FileReads
from ..main_process_tests import main_process_test
from ..model_reads import model_read
from ..random_names import is_random_draw
from ..rank_helpers import rank_helper_body, returned_test
from ..rule import Rule
from ..subtrees import findall

#: Calls that only write the main process's output.
_OUTPUT_CALLS = frozenset(
    {
        "builtins.print",
        "os.makedirs",
        "os.mkdir",
    }
)
_LOGGING = "logging."
#: Runtime calls allowed under the branch (none is a collective; ``save`` of a
#: state dict is refused by its argument).
_RUNTIME_OUTPUT = ("print", "save", "on_main_process")
_RUNTIME_PURE = (
    "is_main_process",
    "is_local_main_process",
    "rank",
    "local_rank",
    "world_size",
)
#: Calls that compute without effect.
_PURE_CALLS = frozenset(
    {
        f"builtins.{n}"
        for n in (
            "str int float bool len round format min max sum abs repr sorted "
            "list dict tuple set enumerate zip range isinstance vars"
        ).split()
    }
    | {"json.dumps"}
)
_PURE_PREFIXES = ("os.path.", "time.", "datetime.", "math.")
_PURE_METHODS = frozenset(
    "item format join tolist cpu detach numpy mean sum items keys values get "
    "strftime upper lower strip split replace".split()
)
_LOGGER_METHODS = frozenset(
    "debug info warning warn error exception critical log".split()
)


class MainProcessBranches(Rule):
    code = "AM047"
    name = "main-process-branches"
    summary = "if int(os.environ.get('RANK', 0)) == 0: (output only) -> if accel.is_main_process():"
    #: After the rules that rewrite the branch's body (AM008's prints and
    #: logged losses, AM010/AM011's saves, AM017's writes), before AM028.
    phase = 59

    def applies(self) -> bool:
        code = self.context.original_code
        return "RANK" in code or "get_rank" in code

    def leave_If(
        self, original_node: cst.If, updated_node: cst.If
    ) -> cst.BaseStatement:
        if original_node.orelse is not None:
            return updated_node
        found = main_process_test(self, original_node.test)
        if found is None:
            return updated_node
        function, variable = found
        if not self._output_only(original_node):
            return updated_node
        test = self.runtime_call(function, [])
        self.report(
            original_node,
            "fixed",
            f"`{_code(original_node.test)}` -> {self.context.alias}.{function}(): "
            f"{self._why(original_node.test, variable)}; it only writes output",
        )
        return updated_node.with_changes(test=test)

    def _why(self, test: cst.BaseExpression, variable: str) -> str:
        """Why ``test`` is true on the runtime's process, as the finding says it."""
        helper = next(
            (
                c
                for c in findall(test, m.Call())
                if isinstance(c, cst.Call)
                and (
                    returned_test(self, c) is not None
                    or rank_helper_body(self, c) is not None
                )
            ),
            None,
        )
        if helper is not None:
            return (
                f"`{_code(helper)}` is the file's own helper over "
                "`dist.get_rank()` where a process group is started (0 where none "
                "is), and the runtime starts the process group with the launcher's "
                "RANK, so the branch runs on the same process as before (run as one "
                "process, with no group, the helper gives rank 0)"
            )
        return _why(test, variable)

    # -- what the branch runs ---------------------------------------------------------
    def _output_only(self, branch: cst.If) -> bool:
        owner = self.index.enclosing_function(branch) or self.index.module
        bound: set[str] = set()
        objects: set[str] = set()
        if not self._block(branch.body, bound, objects):
            return False
        if model_read(self.index, branch.body) is not None:
            return False  # a sharded parameter's value: gathered by a collective
        # A name bound under the branch is read nowhere else.
        inside = set(findall(branch, m.Name()))
        return not any(
            isinstance(name, cst.Name) and name.value in bound and name not in inside
            for name in findall(owner, m.Name())
        )

    def _block(self, block: cst.BaseSuite, bound: set[str], objects: set[str]) -> bool:
        statements = block.body if isinstance(block, cst.IndentedBlock) else [block]
        return all(self._statement(s, bound, objects) for s in statements)

    def _statement(self, node: cst.CSTNode, bound: set[str], objects: set[str]) -> bool:
        if isinstance(node, cst.SimpleStatementLine | cst.SimpleStatementSuite):
            return all(self._small(s, bound, objects) for s in node.body)
        if isinstance(node, cst.If):
            if not self._pure(node.test, objects):
                return False
            orelse = node.orelse
            rest = True
            if isinstance(orelse, cst.If):
                rest = self._statement(orelse, bound, objects)
            elif isinstance(orelse, cst.Else):
                rest = self._block(orelse.body, bound, objects)
            return rest and self._block(node.body, bound, objects)
        if isinstance(node, cst.For):
            if node.orelse is not None or not self._pure(node.iter, objects):
                return False
            targets = findall(node.target, m.Name())
            if not all(isinstance(t, cst.Name) for t in targets):
                return False
            bound.update(t.value for t in targets)  # type: ignore[attr-defined]
            return self._block(node.body, bound, objects) and not findall(
                node.body, m.Break() | m.Continue() | m.Return()
            )
        return False

    def _small(
        self, node: cst.BaseSmallStatement, bound: set[str], objects: set[str]
    ) -> bool:
        if isinstance(node, cst.Pass):
            return True
        if isinstance(node, cst.Expr):
            return isinstance(node.value, cst.Call) and self._output(
                node.value, objects
            )
        if isinstance(node, cst.Assign):
            if len(node.targets) != 1 or not isinstance(
                node.targets[0].target, cst.Name
            ):
                return False
            name = node.targets[0].target.value
            bound.add(name)
            if isinstance(node.value, cst.Call) and self.index.is_runtime_call(
                node.value, "on_main_process"
            ):
                objects.add(name)  # a stand-in off the main process: its calls write
                return self._arguments(node.value, objects)
            return self._pure(node.value, objects)
        return False

    def _output(self, call: cst.Call, objects: set[str]) -> bool:
        """A call that only writes output, with pure arguments."""
        names = self.qualnames(call.func)
        func = call.func
        if names & _OUTPUT_CALLS or any(n.startswith(_LOGGING) for n in names):
            return self._arguments(call, objects)
        if self.index.is_runtime_call(call, *_RUNTIME_OUTPUT):
            if self._read_back(call):
                return False
            return self._arguments(call, objects)
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            receiver = func.value
            if receiver.value in objects or (
                func.attr.value in _LOGGER_METHODS and self._logger(receiver)
            ):
                return self._arguments(call, objects)
            if self._stand_in(receiver):
                return self._arguments(call, objects)
        return False

    def _arguments(self, call: cst.Call, objects: set[str]) -> bool:
        return all(self._pure(arg.value, objects) for arg in call.args)

    def _pure(self, node: cst.BaseExpression, objects: set[str]) -> bool:
        """Does evaluating ``node`` only compute: no collective, no state dict,
        no call of the script's own code, no random draw, no mutation?"""
        if findall(node, m.Lambda() | m.Yield() | m.Await() | m.NamedExpr()):
            return False
        for call in findall(node, m.Call()):
            if not self._pure_call(call, objects):  # type: ignore[arg-type]
                return False
        return True

    def _pure_call(self, call: cst.Call, objects: set[str]) -> bool:
        names = self.qualnames(call.func)
        if any(is_random_draw(n) for n in names):
            return False
        if self.index.is_runtime_call(call, *_RUNTIME_PURE):
            return True
        if self.index.is_runtime_call(call, *_RUNTIME_OUTPUT, "state_dict") or any(
            n.startswith(f"{self.context.alias}.") for n in names
        ):
            return False
        if names & _PURE_CALLS or any(n.startswith(_PURE_PREFIXES) for n in names):
            return True
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _PURE_METHODS:
            # `.items()` of a dict, `.item()` of a tensor; never a method the
            # script defines (a class of its own may give any name any effect)
            return (
                self.index.local_function(func) is None
                and func.attr.value not in self._script_methods
                and not self._script_made(func.value)
            )
        return False

    @cached_property
    def _script_methods(self) -> frozenset[str]:
        """The names of the methods the classes of this file define (``Meter.mean``)."""
        return frozenset(
            f.name.value
            for f in self.index.functions
            if self.index.enclosing_class(f) is not None
        )

    def _script_made(self, receiver: cst.BaseExpression) -> bool:
        """Is ``receiver`` (``meter`` of ``meter.mean()``) bound to what a
        function or class of the script or its project returns (``meter =
        make_meter()``), or not only by plain assignments? Its method may then
        be the script's own: not proven a library call."""
        if not isinstance(receiver, cst.Name):
            return isinstance(receiver, cst.Call) and self._script_call(receiver)
        bindings = self.plain_assignments(receiver)
        if bindings is None:
            return False  # a parameter, a loop target: as before
        return any(
            isinstance(value, cst.Call) and self._script_call(value)
            for _, value in bindings
        )

    def _script_call(self, call: cst.Call) -> bool:
        return (
            self.index.local_function(call.func) is not None
            or self.index.local_class(call.func) is not None
            or self.index.callee(call) is not None
            or self.index.helper(call.func) is not None
        )

    @cached_property
    def _file_reads(self) -> FileReads:
        return FileReads(self)

    def _read_back(self, call: cst.Call) -> bool:
        """``accel.save(meta, "meta.pt")`` whose file the script reads again
        later (``accel.load("meta.pt")`` after the branch): the file is then no
        output only, and AM010's finding on the save stands."""
        if not self.index.is_runtime_call(call, "save"):
            return False
        path = next(
            (a.value for a in call.args if a.keyword and a.keyword.value == "f"),
            call.args[1].value if len(call.args) > 1 else None,
        )
        return self._file_reads.read_again(call, path)

    def _logger(self, name: cst.Name) -> bool:
        """``logger`` bound only to ``logging.getLogger(...)``."""
        bindings = self.plain_assignments(name)
        return bool(bindings) and all(
            isinstance(value, cst.Call)
            and "logging.getLogger" in self.qualnames(value.func)
            for _, value in bindings or ()
        )

    def _stand_in(self, name: cst.Name) -> bool:
        """``writer`` bound only to ``accel.on_main_process(...)`` (AM017): it
        writes on the main process and does nothing on the others."""
        bindings = self.plain_assignments(name)
        return bool(bindings) and all(
            self.index.is_runtime_call(value, "on_main_process")
            for _, value in bindings or ()
        )


def _code(node: cst.CSTNode) -> str:
    text = cst.Module([]).code_for_node(node).strip()
    return text if len(text) <= 60 else text[:57] + "..."


def _why(test: cst.BaseExpression, variable: str) -> str:
    """Why ``test`` is true on the runtime's process, as the finding says it."""
    if "get_rank" in _code(test):
        return (
            "the runtime starts the process group with the launcher's RANK, so "
            "the branch runs on the same process as before (run as one process, "
            "with no group, `get_rank()` raised)"
        )
    return (
        f"the launcher sets {variable} on every process and the runtime reads "
        "the same variable, so the branch runs on the same process as before "
        "(run as one process, the variable's default passes the test)"
    )
