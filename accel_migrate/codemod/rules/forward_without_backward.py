"""AM021 forward-without-backward: a forward in a training step that no backward uses runs under ``torch.no_grad()``.

## What
In a loop that runs a backward, a statement that calls a prepared model (AM004)
and whose results never reach a backward is put under ``torch.no_grad()``. A
result never reaches a backward when every use of the variables it sets is
detached: ``.detach()``, ``.item()``, ``.data`` (not of a PackedSequence,
whose ``.data`` is its rows), ``.tolist()``, ``.shape``, a
comparison, a ``print``, an ``if`` test, or another variable set from it that is
itself only used so. A discarded result (``_``) has no use at all. A forward
that ``torch.autograd.grad`` (or another call that differentiates a graph) takes,
in its statement or through a variable, is not one: its graph is used (an SGLD
step's gradient of the inputs, ``torch.autograd.grad(f(x).sum(), [x])``), and
under ``torch.no_grad()`` that call would fail.

```python
_, feat_real = netD(real, features=True)        # only feat_real.detach() is used
```

## Why
Under DDP every forward of the model in training mode prepares the gradient
exchange of a backward, and the exchange must finish before the next forward.
A forward that no backward follows leaves it waiting; when a later backward
reaches only some of the model's parameters (through another forward), the job
stops at the next forward with "Expected to have finished reduction in the prior
iteration". Without a graph (``torch.no_grad()``) the forward prepares nothing.
The values computed are the same.

## Example
```python
# before
_, feat_real = netD(real, features=True)
err_fm = (feat_fake.mean(0) - feat_real.detach().mean(0)).pow(2).mean()
# after
with torch.no_grad():
    _, feat_real = netD(real, features=True)
err_fm = (feat_fake.mean(0) - feat_real.detach().mean(0)).pow(2).mean()
```

## Fix safety
Safe when what the statement computes is only read detached, which the rule
checks for every use. It is not proven, and the statement is left as it is and
reported as needs-review, when the script registers hooks (``register_forward_hook``:
a hook may keep activations for a loss), when the model's class stores values on
itself outside ``__init__``, or when the file does not ``import torch``.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst
import libcst.matchers as m

from ..analysis import Key, attr_chain
from ..names import DIFFERENTIATING, SAME_OBJECT
from ..patterns import strip_methods, torch_alias
from ..reduction.loss_inputs import packed_sequence
from ..rule import Rule
from ..subtrees import findall

#: Attributes whose value carries no gradient of the tensor they are read from.
_DETACHING = frozenset(
    {
        "detach",
        "detach_",
        "data",
        "item",
        "tolist",
        "numpy",
        "shape",
        "size",
        "dim",
        "ndim",
        "dtype",
        "device",
        "argmax",
        "argmin",
    }
)
_NO_GRAD = frozenset(
    {
        "torch.no_grad",
        "torch.inference_mode",
        "torch.enable_grad",
        "torch.set_grad_enabled",
        "torch.autograd.grad_mode.no_grad",
        "torch.autograd.no_grad",
    }
)
_PRINTS = frozenset({"builtins.print"})
_STORING_METHODS = frozenset(
    {"append", "extend", "insert", "add", "put", "push", "update", "setdefault"}
)
_MAX_DEPTH = 4


class ForwardWithoutBackward(Rule):
    code = "AM021"
    name = "forward-without-backward"
    summary = "forward whose result no backward uses, in a training step -> under torch.no_grad()"

    @cached_property
    def models(self) -> set[Key]:
        return self.index.tagged(
            lambda e: self.index.is_runtime_call(
                strip_methods(e, SAME_OBJECT), "prepare_model"
            ),
            SAME_OBJECT,
        )

    @cached_property
    def torch_name(self) -> str | None:
        return torch_alias(self.index.module)

    @cached_property
    def hooks(self) -> bool:
        return any(
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value.startswith("register_")
            and "hook" in call.func.attr.value
            for call in self.index.calls
        )

    # -- what a statement computes, and where it goes -------------------------------------
    def _forward(self, line: cst.SimpleStatementLine) -> cst.Call | None:
        """The prepared model's call in ``line``, an assignment to plain names."""
        if len(line.body) != 1 or not isinstance(line.body[0], cst.Assign):
            return None
        assign = line.body[0]
        if not all(_names(t.target) for t in assign.targets):
            return None
        for call in findall(assign.value, m.Call()):
            assert isinstance(call, cst.Call)
            if self.index.holds_tagged(call.func, self.models):
                # Fed a PackedSequence, the model returns one, whose `.data` is
                # its rows (a field), not a detached tensor; differentiated in
                # the statement (`torch.autograd.grad(f(x).sum(), [x])`, an
                # SGLD step's input gradient), its graph is used.
                if packed_sequence(self.index, call) or self._differentiated(call):
                    return None
                return call
        return None

    def _differentiated(self, node: cst.CSTNode) -> bool:
        """Is ``node`` in an argument of a call that differentiates its graph
        (``torch.autograd.grad``), within its statement?"""
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, cst.Arg):
                call = self.index.parent(ancestor)
                if isinstance(call, cst.Call) and self.is_call_to(
                    call, DIFFERENTIATING
                ):
                    return True
            elif isinstance(ancestor, cst.BaseStatement):
                return False
        return False

    def _dead(self, key: Key, seen: set[Key], depth: int) -> bool:
        """Are all reads of ``key`` detached (see the module docstring)?"""
        if key in seen:
            return True
        if depth > _MAX_DEPTH:
            return False
        seen.add(key)
        return all(self._dead_read(r, seen, depth) for r in self._reads.get(key, ()))

    @cached_property
    def _reads(self) -> dict[Key, list[cst.Name]]:
        reads: dict[Key, list[cst.Name]] = {}
        for name in findall(self.index.module, m.Name()):
            assert isinstance(name, cst.Name)
            if _is_store(self.index, name):
                continue
            parent = self.index.parent(name)
            if isinstance(parent, cst.Attribute) and parent.attr is name:
                continue
            if isinstance(parent, cst.Arg) and parent.keyword is name:
                continue
            key = self.index.key(name)
            if key is not None:
                reads.setdefault(key, []).append(name)
        return reads

    def _dead_read(self, node: cst.CSTNode, seen: set[Key], depth: int) -> bool:
        child = node
        for parent in self.index.ancestors(node):
            if isinstance(parent, cst.Attribute) and parent.value is child:
                if parent.attr.value in _DETACHING:
                    return True
                if parent.attr.value == "backward":
                    return False
            elif isinstance(parent, cst.Comparison):
                return True
            elif isinstance(parent, cst.Arg):
                call = self.index.parent(parent)
                if isinstance(call, cst.Call):
                    if self.qualnames(
                        call.func
                    ) & _PRINTS or self.index.is_runtime_call(call, "print"):
                        return True
                    if (
                        self.index.is_backward_call(call)
                        or self.is_call_to(call, DIFFERENTIATING)
                        or self.index.callee(call)
                    ):
                        return False  # a backward or gradient, or a local function
                    if (
                        isinstance(call.func, cst.Attribute)
                        and call.func.attr.value in _STORING_METHODS
                    ):
                        return False  # kept in a container
            elif isinstance(parent, cst.Assign):
                if child is not parent.value:
                    return False
                bound = [_names(t.target) for t in parent.targets]
                if any(names is None for names in bound):
                    return False  # a subscript or attribute target: kept
                targets = [n for names in bound for n in names or []]
                return all(
                    (key := self.index.key(t)) is not None
                    and self._dead(key, seen, depth + 1)
                    for t in targets
                )
            elif isinstance(parent, cst.AugAssign):
                key = self.index.key(parent.target)
                return (
                    child is parent.value
                    and isinstance(parent.target, cst.Name)
                    and key is not None
                    and self._dead(key, seen, depth + 1)
                )
            elif isinstance(parent, (cst.If, cst.While, cst.IfExp)) and (
                child is parent.test
            ):
                return True
            elif isinstance(
                parent, (cst.BaseSmallStatement, cst.BaseCompoundStatement)
            ):
                return False  # returned, yielded, or a statement of its own
            child = parent
        return False

    def _under_no_grad(self, node: cst.CSTNode) -> bool:
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, cst.With) and any(
                self.is_call_to(item.item, _NO_GRAD) for item in ancestor.items
            ):
                return True
            if isinstance(ancestor, cst.FunctionDef) and any(
                self.qualnames(
                    d.decorator.func
                    if isinstance(d.decorator, cst.Call)
                    else d.decorator
                )
                & _NO_GRAD
                for d in ancestor.decorators
            ):
                return True
        return False

    def _in_training_step(self, node: cst.CSTNode) -> bool:
        return any(
            self.index.runs_backward(loop.body)
            for path in self.index.loop_paths(node)
            for loop in path
        )

    def _why_not(self, forward: cst.Call) -> str | None:
        """Why wrapping cannot be proven safe, if it cannot."""
        if self.torch_name is None:
            return "the file does not `import torch`"
        if self.hooks:
            return "the script registers hooks, which may keep activations for a loss"
        key = self.index.key(forward.func)
        for value in self.index.values.get(key, []) if key else []:
            core = strip_methods(_unprepared(value), SAME_OBJECT)
            cls = (
                self.index.local_class(core.func)
                if isinstance(core, cst.Call)
                else None
            )
            if cls is not None and _stores_on_self(cls):
                return f"`{cls.name.value}` stores values on itself outside __init__"
        return None

    # -- rewriting -----------------------------------------------------------------------
    def leave_SimpleStatementLine(
        self,
        original_node: cst.SimpleStatementLine,
        updated_node: cst.SimpleStatementLine,
    ) -> cst.BaseStatement:
        forward = self._forward(original_node)
        if forward is None or not isinstance(
            self.parent(original_node), cst.IndentedBlock
        ):
            return updated_node
        if self._under_no_grad(original_node) or not self._in_training_step(
            original_node
        ):
            return updated_node
        assign = original_node.body[0]
        assert isinstance(assign, cst.Assign)
        seen: set[Key] = set()
        targets = [n for t in assign.targets for n in _names(t.target) or []]
        if not all(
            (key := self.index.key(t)) is not None and self._dead(key, seen, 0)
            for t in targets
        ):
            return updated_node
        why_not = self._why_not(forward)
        if why_not is not None:
            self.report(
                forward,
                "needs-review",
                "forward of a prepared model whose result never reaches a backward: under DDP "
                "it leaves the gradient exchange waiting (the next forward may fail); put it under "
                f"torch.no_grad() (not done: {why_not})",
            )
            return updated_node
        self.report(
            forward,
            "fixed",
            "forward of a prepared model whose result never reaches a backward -> under "
            "torch.no_grad(): under DDP it would leave the gradient exchange waiting",
        )
        no_grad = cst.parse_expression(f"{self.torch_name}.no_grad()")
        return cst.With(
            items=[cst.WithItem(item=no_grad)],
            body=cst.IndentedBlock(body=[updated_node.with_changes(leading_lines=[])]),
            leading_lines=updated_node.leading_lines,
        )


def _unprepared(expr: cst.BaseExpression) -> cst.BaseExpression:
    core = strip_methods(expr, SAME_OBJECT)
    if (
        isinstance(core, cst.Call)
        and attr_chain(core.func) is not None
        and str(attr_chain(core.func)).endswith(".prepare_model")
        and core.args
    ):
        return core.args[0].value
    return core


def _names(target: cst.BaseExpression) -> list[cst.Name] | None:
    """The names a target binds, when it binds nothing but names."""
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        found: list[cst.Name] = []
        for element in target.elements:
            inner = _names(element.value)
            if inner is None:
                return None
            found.extend(inner)
        return found
    return None


def _is_store(index: object, name: cst.Name) -> bool:
    """Is ``name`` where a value is stored (an assignment or loop target)?"""
    node: cst.CSTNode = name
    for parent in index.ancestors(name):  # type: ignore[attr-defined]
        if isinstance(parent, (cst.AssignTarget, cst.AsName)):
            return True
        if isinstance(parent, (cst.For, cst.CompFor)):
            return node is parent.target
        if isinstance(parent, (cst.AugAssign, cst.AnnAssign)):
            return node is parent.target
        if not isinstance(
            parent, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)
        ):
            return False
        node = parent
    return False


def _stores_on_self(cls: cst.ClassDef) -> bool:
    for method in findall(cls.body, m.FunctionDef()):
        assert isinstance(method, cst.FunctionDef)
        if method.name.value == "__init__":
            continue
        if findall(
            method.body,
            m.AssignTarget(target=m.Attribute(value=m.Name("self")))
            | m.AugAssign(target=m.Attribute(value=m.Name("self"))),
        ):
            return True
        for call in findall(
            method.body,
            m.Call(func=m.Attribute(value=m.Attribute(value=m.Name("self")))),
        ):
            if call.func.attr.value in _STORING_METHODS:  # type: ignore[attr-defined]
                return True
    return False
