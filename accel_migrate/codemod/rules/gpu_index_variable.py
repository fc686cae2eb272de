"""AM022 gpu-index-variable: a GPU index kept in a variable (``device = 0``).

## What
- ``.to(device)`` where ``device`` is only ever bound to an integer literal
  (``device = 0``) becomes ``.to(accel.device())``, as ``.to(0)`` does (AM001).
- Such a variable, when its name says it is a GPU (``device``, ``gpu``,
  ``gpu_id``, ``device_id``, ``cuda_device``...) and the script passes it on
  (to a function or a class, into another variable or a container, or returns
  it), is left alone and reported as needs-review at the assignment, naming that
  use. Comparisons and printouts of it are not uses that pick a GPU.
- ``.to(args.gpu)``, with ``args = parser.parse_args()``: a command-line option
  named like a GPU index (``gpu``, ``gpu_id``, ``device_id``...; not ``device``,
  which scripts as often set to ``"cuda"``) is reported as needs-review: its value
  is not in the code, and it may be ``None``, which ``.to()`` ignores.

## Why
``.to(0)`` means "GPU 0". Under ``accel-migrate launch`` every process has its own
GPU, and a model moved to GPU 0 after ``accel.prepare_model`` put it on the
process's own one ends up, in every process, on the first GPU. A number handed on
to other code (``Trainer(model, data, device)``, which then calls
``model.to(self.gpu_id)``) reaches a ``.to()`` the codemod cannot follow.

## Example
```python
# before
device = 0  # shorthand for cuda:0
model = model.to(device)
# after
device = 0  # shorthand for cuda:0
model = model.to(accel.device())
```

## Fix safety
Safe: the variable has no other binding (no parameter, loop target, ``global``
from elsewhere, augmented assignment or import of the same name in its scope), so
the integer is the only value ``.to()`` can receive, and ``.to(i)`` with an
integer always names a GPU. The assignment itself is kept: other uses may read the
number. A variable with any other binding is not rewritten. The needs-review
report goes by the variable's name: a counter such as ``n_gpu = 1`` is not a GPU
index and is not reported.
"""

from __future__ import annotations

import re

import libcst as cst
from libcst.metadata import PositionProvider

from ..analysis import attr_chain
from ..rule import Rule
from ..scopes import Assignment

#: Names that say "a GPU" (an index), not "how many GPUs".
_GPU_NAME = re.compile(
    r"(?:cuda_?)?(?:device|dev|gpu)(?:_?(?:id|idx|index|num|no))?", re.IGNORECASE
)
#: Option names that say "a GPU index" (``args.gpu``), but not ``args.device``,
#: which scripts as often set to ``"cuda"``.
_GPU_INDEX_ATTRIBUTE = re.compile(
    r"(?:cuda_?)?gpu(?:_?(?:id|idx|index|num|no))?"
    r"|(?:cuda_?)?device_?(?:id|idx|index|num|no)",
    re.IGNORECASE,
)
#: Calls that only show a value (``print(device)``, ``logger.info(...)``).
_OUTPUT_CALLS = frozenset(
    {"print", "debug", "info", "warning", "warn", "error", "log", "write", "format"}
)


class GpuIndexVariable(Rule):
    code = "AM022"
    name = "gpu-index-variable"
    summary = "device = 0; x.to(device) -> x.to(accel.device()); device = 0 passed on -> reported"

    def _integer_bindings(self, name: cst.Name) -> list[Assignment] | None:
        """Every binding of ``name``, when each is ``name = <integer>``."""
        found = self.plain_assignments(name)
        if found is None or not all(isinstance(v, cst.Integer) for _, v in found):
            return None
        return [binding for binding, _ in found]

    def _parsed_arguments(self, node: cst.BaseExpression) -> bool:
        """``args`` of ``args = parser.parse_args()``, its only binding."""
        found = self.plain_assignments(node) if isinstance(node, cst.Name) else None
        return found is not None and all(
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value == "parse_args"
            for _, value in found
        )

    def _device_position(self, node: cst.CSTNode) -> bool:
        """``x.to(node)``: the first positional argument of a ``.to`` call."""
        arg = self.parent(node)
        call = self.parent(arg) if isinstance(arg, cst.Arg) else None
        return (
            isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "to"
            and bool(call.args)
            and call.args[0] is arg
            and arg.keyword is None
            and not arg.star
        )

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        if not original_node.args:
            return updated_node
        first = original_node.args[0].value
        if (
            isinstance(first, cst.Attribute)
            and _GPU_INDEX_ATTRIBUTE.fullmatch(first.attr.value)
            and self._device_position(first)
            and self._parsed_arguments(first.value)
        ):
            shown = cst.Module([]).code_for_node(first)
            self.report(
                original_node,
                "needs-review",
                f"`.to({shown})`: a GPU index from the command line puts every "
                "process on that GPU; use accel.device()",
                if_migrated=True,
            )
            return updated_node
        if not (
            isinstance(first, cst.Name)
            and self._device_position(first)
            and self._integer_bindings(first) is not None
        ):
            return updated_node
        self.report(
            original_node,
            "fixed",
            f"GPU index `{first.value}` in to(...) -> accel.device()",
        )
        device = updated_node.args[0].with_changes(
            value=self.runtime_call("device", [])
        )
        return updated_node.with_changes(args=[device, *updated_node.args[1:]])

    def visit_Assign(self, node: cst.Assign) -> None:
        if not isinstance(node.value, cst.Integer):
            return
        for target in node.targets:
            name = target.target
            if isinstance(name, cst.Name) and _GPU_NAME.fullmatch(name.value):
                self._report_passed_on(name, node.value)

    def _report_passed_on(self, name: cst.Name, value: cst.Integer) -> None:
        for binding in self._integer_bindings(name) or ():
            if binding.node is not name:
                continue
            for access in sorted(binding.references, key=self._place):
                use = self._passed_on(access.node)
                if use is None:
                    continue
                shown = cst.Module([]).code_for_node(use)
                self.report(
                    value,
                    "needs-review",
                    f"GPU index `{name.value} = {value.value}` is passed on as "
                    f"`{_short(shown)}`: if it picks the GPU there, every process uses "
                    f"GPU {value.value}; pass accel.device() instead",
                    if_migrated=True,
                )
                return

    def _passed_on(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The call, assignment or return that hands ``node`` to other code; None
        for a use that cannot choose a GPU (``.to(node)``, which is rewritten, a
        comparison, a printout)."""
        parent = self.parent(node)
        if isinstance(parent, cst.Arg):
            call = self.parent(parent)
            if self._device_position(node) or not isinstance(call, cst.Call):
                return None
            callee = attr_chain(call.func) or ""
            if callee.rpartition(".")[2] in _OUTPUT_CALLS:
                return None
            return call
        if isinstance(parent, (cst.Assign, cst.AnnAssign, cst.Return)):
            return parent
        if isinstance(parent, (cst.Element, cst.DictElement)):
            return self.parent(parent)
        return None

    def _place(self, access: object) -> tuple[int, int]:
        start = self.get_metadata(PositionProvider, access.node).start  # type: ignore[attr-defined]
        return start.line, start.column


def _short(code: str) -> str:
    line = " ".join(code.split())
    return line if len(line) <= 60 else line[:57] + "..."
