"""Losses a class of another batch file backpropagates, read by its caller.

minGPT's ``Trainer.run`` (in ``mingpt/trainer.py``) does
``logits, self.loss = model(x, y); self.loss.backward()``, and the project
script registers ``trainer.add_callback("on_batch_end", fn)`` with ``fn``
printing ``trainer.loss.item()``. Once the batch migrates the class's file,
that loss is this process's share of the batch. Where the callback runs (which
processes, how often) is decided in the other file, so no collective can be
placed at the read here: it is reported, naming the file and line of the
backward (``handed_loss_reads``), unless the class shows that it runs the
callback once per step, after the backward, on every process
(``HelperFact.step_callbacks``), and this file hands it a function of its own
used nowhere else, whose first parameter (the instance) the read reads, at a
place every process reaches: ``step_reads``, made
``accel.global_loss(trainer.loss)`` by AM008. Static only: nothing runs.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from .analysis import ModuleIndex
from .patterns import argument
from .project_facts import HelperFact
from .stored_losses import _reads_value
from .subtrees import findall


def _trainer_classes(index: ModuleIndex) -> list[HelperFact]:
    """Classes of other batch files this file constructs whose methods
    backpropagate an attribute (``HelperFact.losses``)."""
    found: dict[str, HelperFact] = {}
    for call in index.calls:
        fact = index.helper(call.func)
        if (
            fact is not None
            and fact.kind == "class"
            and fact.batch_migrated
            and fact.losses
        ):
            found.setdefault(fact.where, fact)
    return list(found.values())


def step_reads(index: ModuleIndex) -> dict[cst.Call, HelperFact]:
    """Reads of a backpropagated attribute of the instance in a step callback
    (see the module docstring), with the class."""
    found: dict[cst.Call, HelperFact] = {}
    for function, parameter, fact in _callbacks(index):
        for call in findall(function, m.Call()):
            assert isinstance(call, cst.Call)
            tensor = _reads_value(index, call)
            if (
                isinstance(tensor, cst.Attribute)
                and tensor.attr.value in dict(fact.losses)
                and isinstance(tensor.value, cst.Name)
                and index.key(tensor.value) == parameter
                and index.enclosing_function(call) is function
                and index.uniform(call)
            ):
                found[call] = fact
    return found


def _callbacks(index: ModuleIndex) -> list[tuple[cst.FunctionDef, object, HelperFact]]:
    """(the function, the key of its first parameter, the class) for each
    function of this file handed to a step-callback method of an instance of a
    batch class, and named nowhere else."""
    found = []
    for call in index.calls:
        func = call.func
        if not isinstance(func, cst.Attribute):
            continue
        fact = _instance_class(index, func.value)
        if fact is None:
            continue
        for method, parameter, position in fact.step_callbacks:
            if method != func.attr.value or any(a.star for a in call.args):
                continue
            value = argument(call, position, parameter)
            if value is None:
                continue
            function = index.local_function(value)
            if function is None or not isinstance(value, cst.Name):
                continue
            params = [*function.params.posonly_params, *function.params.params]
            named = findall(index.module, m.Name(value.value))
            if not params or len(named) != 2:  # its def, and this argument
                continue
            first = params[0].name.value
            found.append((function, index.function_scope_key(function, first), fact))
    return found


def _instance_class(
    index: ModuleIndex, receiver: cst.BaseExpression
) -> HelperFact | None:
    """The batch trainer class every value of ``receiver`` constructs."""
    key = index.key(receiver)
    values = index.values.get(key, []) if key is not None else []
    classes = set()
    for value in values:
        if not isinstance(value, cst.Call):
            return None
        fact = index.helper(value.func)
        if fact is None or fact not in _trainer_classes(index):
            return None
        classes.add(fact)
    return classes.pop() if len(classes) == 1 else None


def handed_loss_reads(index: ModuleIndex) -> list[tuple[cst.Call, str]]:
    """``x.loss.item()`` / ``float(x.loss)`` where ``loss`` is an attribute such
    a class backpropagates, outside ``step_reads``, with a true sentence for a
    needs-review finding."""
    classes = _trainer_classes(index)
    if not classes:
        return []
    proven = step_reads(index)
    found: list[tuple[cst.Call, str]] = []
    for call in findall(index.module, m.Call()):
        assert isinstance(call, cst.Call)
        if call in proven:
            continue
        tensor = _reads_value(index, call)
        if not isinstance(tensor, cst.Attribute) or (
            isinstance(tensor.value, cst.Name) and tensor.value.value == "self"
        ):
            continue
        for fact in classes:
            line = dict(fact.losses).get(tensor.attr.value)
            if line is None:
                continue
            found.append(
                (
                    call,
                    f"`.{tensor.attr.value}` is the loss {fact.where} backpropagates "
                    f"(`self.{tensor.attr.value}`, line {line}), read here on an "
                    "instance of it: each process holds its own share of the batch, "
                    "and where this read runs (which processes, how often) is "
                    f"decided in {fact.file}, so it is not made global here; make it "
                    "global with accel.global_loss(...) where every process reads it",
                )
            )
            break
    return found
