"""AM001 device-choice: the script's choice of GPU becomes ``accel.device()``.

## What
Rewrites the expressions that pick a CUDA device:

- ``torch.device("cuda")``, ``torch.device("cuda:0")``, ``torch.device("cuda", 0)``
- ``torch.device("cuda" if torch.cuda.is_available() else "cpu")`` and the same
  choice written as a bare string expression
- ``torch.accelerator.current_accelerator()``, and the
  ``if use_accel: device = ...current_accelerator() else: device = torch.device("cpu")``
  statement
- ``"cuda"``, ``"cuda:0"`` and plain integer GPU ids given to ``.to(...)``, and
  ``device="cuda"`` / ``map_location="cuda:0"`` keyword arguments
- ``device = "cuda:0"``: a GPU name assigned to a variable becomes
  ``accel.device().type`` (``"cuda"``, the process's own GPU, or ``"cpu"``)
- GPU names built from an index (``torch.device(f"cuda:{gpu_id}")``,
  ``.to(f"cuda:{args.gpu}")``, ``"cuda:%d" % i``) and a GPU index chosen against
  the CPU (``gpu_id = 0 if torch.cuda.is_available() else "cpu"``, which
  ``.to(gpu_id)`` then uses) become ``accel.device()``
- ``torch.cuda.set_device(i)`` statements are removed, and with them an
  ``if torch.cuda.is_available():`` (no ``else``) that held nothing else

## Why
Under ``accel-migrate launch`` every process must use its own GPU
(``cuda:LOCAL_RANK``); a hard-coded ``cuda:0`` puts every process on the first GPU.
``accel.device()`` returns the process's GPU, or the CPU where there is none, so
``.to(device)`` calls elsewhere in the script keep working unchanged. The runtime
also makes that GPU the current one; a ``torch.cuda.set_device(i)`` left in the
script would move every process back to GPU ``i``.

## Example
```python
# before
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
images = images.to("cuda:0")
# after
device = accel.device()
images = images.to(accel.device())
```

## Fix safety
Safe. A condition other than "is CUDA available" (a ``--no-cuda`` flag) is kept:
``torch.device("cuda" if use_cuda else "cpu")`` becomes
``accel.device(accelerator=use_cuda)``, which keeps the whole run on the CPU when
it is false. A string-valued choice stays a string (``accel.device().type``), so
comparisons such as ``device == "cuda"`` behave as before. A GPU index becomes a
``torch.device``, which ``.to()``, ``.cuda()`` and ``device=`` accept; where the
script also uses the index as a number (``gpu_id == 0``) it is left alone and
reported as needs-review. A ``set_device`` call inside a larger expression is
reported, not removed. A choice that involves
Apple's MPS backend is reported as needs-review and left alone: distributed
training runs on CUDA or the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import libcst as cst
import libcst.matchers as m

from ..analysis import attr_chain
from ..device_branches import (
    _is_mps_string,
    _negated,
    _replace_value,
    _single_assignment,
)
from ..patterns import is_cpu_string, is_cuda_name
from ..rule import Rule
from ..subtrees import findall

Kind = Literal["device", "string"]

_AVAILABLE = {"torch.cuda.is_available", "torch.accelerator.is_available"}
_CURRENT_ACCELERATOR = {"torch.accelerator.current_accelerator"}
_DEVICE_KEYWORDS = {"device", "map_location"}
_SET_DEVICE = {"torch.cuda.set_device"}
#: Calls that only ask about the GPUs.
_GPU_QUERIES = {"torch.cuda.is_available", "torch.cuda.device_count"}


class DeviceChoice(Rule):
    code = "AM001"
    name = "device-choice"
    summary = "GPU choice (torch.device('cuda'), 'cuda:0', current_accelerator()) -> accel.device()"

    # -- recognisers (always on original nodes) -------------------------------------------
    def _accelerator(self, node: cst.BaseExpression) -> Kind | None:
        """Does ``node`` name the accelerator? As a torch.device or as a string?"""
        if is_cuda_name(node):
            return "string"
        if isinstance(node, cst.Integer):
            return (
                "device"  # a GPU index (`0 if ... else "cpu"`): .to(i) takes a device
            )
        if isinstance(node, cst.Call):
            names = self.qualnames(node.func)
            if (
                "torch.device" in names
                and node.args
                and is_cuda_name(node.args[0].value)
            ):
                return "device"
            if names & _CURRENT_ACCELERATOR:
                return "device"
        if (
            isinstance(node, cst.Attribute)
            and node.attr.value == "type"
            and self._accelerator(node.value) == "device"
        ):
            return "string"
        return None

    def _cpu(self, node: cst.BaseExpression) -> bool:
        if is_cpu_string(node):
            return True
        return (
            isinstance(node, cst.Call)
            and "torch.device" in self.qualnames(node.func)
            and len(node.args) == 1
            and is_cpu_string(node.args[0].value)
        )

    def _mentions_mps(self, node: cst.CSTNode) -> bool:
        code = cst.Module([]).code_for_node(node)
        return "mps" in code

    def _choice(self, node: cst.IfExp) -> tuple[Kind, cst.BaseExpression | None] | None:
        """``A if C else B`` choosing between the accelerator and the CPU: the kind of
        value and the condition under which it is the accelerator (None: "when
        available", which is what ``accel.device()`` does anyway)."""
        if self._accelerator(node.body) and self._cpu(node.orelse):
            accel_side, cpu_side, condition = node.body, node.orelse, node.test
        elif self._cpu(node.body) and self._accelerator(node.orelse):
            accel_side, cpu_side, condition = (
                node.orelse,
                node.body,
                _negated(node.test),
            )
        else:
            return None
        both_strings = self._accelerator(accel_side) == "string" and is_cpu_string(
            cpu_side
        )
        kind: Kind = "string" if both_strings else "device"
        if self._availability_check(condition):
            return kind, None
        return kind, condition

    def _availability_check(self, node: cst.BaseExpression) -> bool:
        return (
            isinstance(node, cst.Call)
            and not node.args
            and bool(self.qualnames(node.func) & _AVAILABLE)
        )

    # -- builders ---------------------------------------------------------------------------
    def _device_call(self, condition: cst.BaseExpression | None = None) -> cst.Call:
        args = []
        if condition is not None:
            args.append(
                cst.Arg(
                    keyword=cst.Name("accelerator"),
                    value=condition,
                    equal=cst.AssignEqual(
                        whitespace_before=cst.SimpleWhitespace(""),
                        whitespace_after=cst.SimpleWhitespace(""),
                    ),
                )
            )
        return self.runtime_call("device", args)

    def _value(
        self, kind: Kind, condition: cst.BaseExpression | None = None
    ) -> cst.BaseExpression:
        call = self._device_call(condition)
        return (
            cst.Attribute(value=call, attr=cst.Name("type"))
            if kind == "string"
            else call
        )

    # -- rewrites ---------------------------------------------------------------------------
    def leave_IfExp(
        self, original_node: cst.IfExp, updated_node: cst.IfExp
    ) -> cst.BaseExpression:
        parent = self.parent(original_node)
        if isinstance(parent, cst.Arg):
            call = self.parent(parent)
            if isinstance(call, cst.Call) and "torch.device" in self.qualnames(
                call.func
            ):
                return updated_node  # torch.device(<choice>) is rewritten as a whole
        choice = self._choice(original_node)
        if choice is None:
            if self._mentions_mps(original_node) and (
                self._accelerator(original_node.body)
                or self._accelerator(original_node.orelse)
            ):
                self.report(
                    original_node,
                    "needs-review",
                    "device choice involves MPS; choose the device with accel.device() by hand",
                )
            return updated_node
        kind, condition = choice
        numeric = self._numeric_use(original_node)
        if numeric is not None:
            self.report(
                original_node,
                "needs-review",
                f"GPU index used as a number (`{numeric}`); every process would use this GPU: choose the device with accel.device() by hand",
                if_migrated=True,
            )
            return updated_node
        self.report(original_node, "fixed", "device choice -> accel.device()")
        return self._value(kind, condition)

    def _numeric_use(self, choice: cst.IfExp) -> str | None:
        """For ``gpu_id = 0 if ... else "cpu"``: a use of ``gpu_id`` as a number
        (``gpu_id == 0``, ``gpu_id + 1``), which a torch.device would break."""
        if not isinstance(choice.body, cst.Integer) and not isinstance(
            choice.orelse, cst.Integer
        ):
            return None
        assign = self.parent(choice)
        if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
            return None
        key = self.index.key(assign.targets[0].target)
        if key is None:
            return None
        for name in findall(self.index.module, m.Name() | m.Attribute()):
            if name is assign.targets[0].target or self.index.key(name) != key:  # type: ignore[arg-type]
                continue
            parent = self.index.parent(name)
            if isinstance(
                parent, (cst.Comparison, cst.BinaryOperation, cst.ComparisonTarget)
            ) or (isinstance(parent, cst.SubscriptElement)):
                return cst.Module([]).code_for_node(parent)
        return None

    def _is_set_device(self, small: cst.BaseSmallStatement) -> bool:
        return isinstance(small, cst.Expr) and self.is_call_to(small.value, _SET_DEVICE)

    def _report_set_device(self, small: cst.BaseSmallStatement) -> None:
        self.report(
            small,
            "fixed",
            "torch.cuda.set_device(...) removed: the runtime makes this process's own GPU the current one",
        )

    def leave_SimpleStatementLine(
        self,
        original_node: cst.SimpleStatementLine,
        updated_node: cst.SimpleStatementLine,
    ) -> cst.SimpleStatementLine:
        """``torch.cuda.set_device(i)``: the runtime already made this process's GPU
        the current one; setting another would put every process on GPU ``i``.
        (A line holding nothing else is removed by its block, below.)"""
        if not any(self._is_set_device(s) for s in original_node.body) or all(
            self._is_set_device(s) for s in original_node.body
        ):
            return updated_node
        kept = []
        for original, small in zip(original_node.body, updated_node.body, strict=True):
            if self._is_set_device(original):
                self._report_set_device(original)
            else:
                kept.append(small)
        last = kept[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        return updated_node.with_changes(body=[*kept[:-1], last])

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        return updated_node.with_changes(
            body=self._without_set_device(original_node.body, updated_node.body)
        )

    def leave_Module(
        self, original_node: cst.Module, updated_node: cst.Module
    ) -> cst.Module:
        return updated_node.with_changes(
            body=self._without_set_device(original_node.body, updated_node.body)
        )

    def _without_set_device(
        self,
        original: Sequence[cst.BaseStatement],
        updated: Sequence[cst.BaseStatement],
    ) -> list[cst.BaseStatement]:
        """The block's statements less those that only call set_device; their
        leading blank lines and comments stay, on the next statement."""
        if len(original) != len(updated):
            return list(updated)
        body: list[cst.BaseStatement] = []
        carried: list[cst.EmptyLine] = []
        for before, after in zip(original, updated, strict=True):
            if isinstance(before, cst.SimpleStatementLine) and all(
                self._is_set_device(s) for s in before.body
            ):
                for small in before.body:
                    self._report_set_device(small)
                carried.extend(after.leading_lines)
                continue
            if self._only_sets_device(before):
                # `if torch.cuda.is_available(): torch.cuda.set_device(i)`: nothing
                # is left of it (its set_device line was reported by its block).
                carried.extend(after.leading_lines)
                continue
            if carried:
                after = after.with_changes(
                    leading_lines=[*carried, *after.leading_lines]
                )
                carried = []
            body.append(after)
        if not body:  # the block held nothing else
            return [cst.SimpleStatementLine(body=[cst.Pass()], leading_lines=carried)]
        return body

    def _only_sets_device(self, statement: cst.BaseStatement) -> bool:
        """An ``if`` without ``else`` whose block only calls set_device, on a test
        that does nothing but ask about the GPUs (so dropping it changes nothing)."""
        if not (
            isinstance(statement, cst.If)
            and statement.orelse is None
            and isinstance(statement.body, cst.IndentedBlock)
            and all(
                isinstance(line, cst.SimpleStatementLine)
                and all(self._is_set_device(s) for s in line.body)
                for line in statement.body.body
            )
        ):
            return False
        return all(
            self.is_call_to(call, _GPU_QUERIES)
            for call in findall(statement.test, m.Call())
        )

    def visit_Call(self, node: cst.Call) -> None:
        statement = self.parent(node)
        if self.is_call_to(node, _SET_DEVICE) and not (
            isinstance(statement, cst.Expr)
            and isinstance(self.parent(statement), cst.SimpleStatementLine)
        ):
            self.report(
                node,
                "needs-review",
                "torch.cuda.set_device(...) conflicts with the runtime, which makes this process's own GPU the current one; remove it",
                if_migrated=True,
            )

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        names = self.qualnames(original_node.func)
        if "torch.device" in names and original_node.args:
            first = original_node.args[0].value
            if is_cuda_name(first) and len(original_node.args) <= 2:
                self.report(
                    original_node, "fixed", "torch.device('cuda') -> accel.device()"
                )
                return self._device_call()
            if isinstance(first, cst.IfExp) and len(original_node.args) == 1:
                choice = self._choice(first)
                if choice is not None:
                    self.report(
                        original_node, "fixed", "device choice -> accel.device()"
                    )
                    return self._device_call(choice[1])
                if self._mentions_mps(first):
                    self.report(
                        original_node,
                        "needs-review",
                        "device choice involves MPS; choose the device with accel.device() by hand",
                    )
            elif _is_mps_string(first):
                self.report(
                    original_node,
                    "needs-review",
                    "MPS device: distributed training runs on CUDA or the CPU; choose the device with accel.device() by hand",
                )
            return updated_node
        if names & _CURRENT_ACCELERATOR:
            self.report(
                original_node, "fixed", "current_accelerator() -> accel.device()"
            )
            return self._device_call()
        return self._rewrite_arguments(original_node, updated_node)

    def _rewrite_arguments(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """``.to("cuda:0")``, ``.to(0)``, ``device="cuda"``, ``map_location="cuda:0"``."""
        is_to = (
            isinstance(original.func, cst.Attribute)
            and original.func.attr.value == "to"
        )
        args = list(updated.args)
        changed = False
        for i, arg in enumerate(original.args):
            positional_target = is_to and i == 0 and arg.keyword is None
            keyword_target = (
                arg.keyword is not None and arg.keyword.value in _DEVICE_KEYWORDS
            )
            if not (positional_target or keyword_target):
                continue
            value = arg.value
            if is_cuda_name(value) or (
                positional_target and isinstance(value, cst.Integer)
            ):
                args[i] = args[i].with_changes(value=self._device_call())
                changed = True
        if not changed:
            return updated
        func = original.func
        what = (
            func.attr.value
            if isinstance(func, cst.Attribute)
            else attr_chain(func) or "call"
        )
        self.report(
            original, "fixed", f"hard-coded GPU in {what}(...) -> accel.device()"
        )
        return updated.with_changes(args=args)

    def leave_Assign(
        self, original_node: cst.Assign, updated_node: cst.Assign
    ) -> cst.Assign:
        """``device = "cuda:0"``: a device name kept in a variable for ``.to(device)``."""
        if (
            len(original_node.targets) == 1
            and attr_chain(original_node.targets[0].target) is not None
            and is_cuda_name(original_node.value)
        ):
            self.report(
                original_node.value,
                "fixed",
                "hard-coded GPU name -> accel.device().type",
            )
            return updated_node.with_changes(value=self._value("string"))
        return updated_node

    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> cst.If:
        """``if flag: device = <accelerator> else: device = <cpu>``: keep the CPU branch
        on the CPU for the whole run (the model too)."""
        if not isinstance(original_node.orelse, cst.Else):
            return updated_node
        body = _single_assignment(original_node.body)
        other = _single_assignment(original_node.orelse.body)
        if body is None or other is None or body[0] != other[0]:
            return updated_node
        if self._accelerator(body[1]) and self._cpu(other[1]):
            cpu_in_else = True
        elif self._cpu(body[1]) and self._accelerator(other[1]):
            cpu_in_else = False
        else:
            return updated_node
        cpu_value = other[1] if cpu_in_else else body[1]
        kind: Kind = "string" if is_cpu_string(cpu_value) else "device"
        replacement = self._value(kind, cst.Name("False"))
        self.report(
            original_node,
            "fixed",
            "CPU branch of the device choice -> accel.device(accelerator=False)",
        )
        if cpu_in_else:
            orelse = updated_node.orelse
            assert isinstance(orelse, cst.Else)
            return updated_node.with_changes(
                orelse=orelse.with_changes(
                    body=_replace_value(orelse.body, replacement)
                )
            )
        return updated_node.with_changes(
            body=_replace_value(updated_node.body, replacement)
        )
