"""Models prepared in this file on which a method of their class registers a
buffer or a module after they are prepared (AM004's all or nothing).

pytorch-ewc's ``MLP.consolidate`` keeps each parameter's mean and Fisher
diagonal as buffers (``self.register_buffer("{}_mean".format(n), ...)``) after
each task; ``train(model, ...)`` in ``train.py`` calls
``model.consolidate(model.estimate_fisher(...))`` on the model ``main.py``
builds and hands it. Prepared, the model refuses that registration after its
first forward (``LateRegistrationError``, docs/runtime.md: a late buffer is
refused under every strategy, a late parameter adopted), and the Fisher it
would keep is each process's own. The class's methods come from its
``HelperFact.late_registrations`` (a class of another module of the project),
the calls from this file (``model.consolidate(...)`` on a model of the file)
and from a local function handed the model (``HelperFact.parameter_methods``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

from .analysis import Key, ModuleIndex
from .patterns import argument
from .trained_models import snippet


def late_registered(
    index: ModuleIndex,
    prepared: Callable[[cst.BaseExpression], bool],
    core: Callable[[cst.BaseExpression], cst.BaseExpression],
) -> Iterator[tuple[cst.CSTNode, str]]:
    """(call, message) for each call of this file that runs a registering
    method on a model ``prepared`` says is prepared: on the model itself
    (``mlp.consolidate(f)``) or by a local function it is handed to
    (``train(mlp, ...)``). ``core`` takes a construction out of ``.to()``."""
    for call in index.calls:
        func = call.func
        if isinstance(func, cst.Attribute) and prepared(func.value):
            phrase = dict(_registrations(index, func.value, core)).get(func.attr.value)
            if phrase:
                yield call, (f"`{snippet(call)}`, on the prepared model, runs {phrase}")
        fact = index.helper(func)
        if fact is None or fact.kind == "class" or not fact.parameter_methods:
            continue
        for name, position, method, line in fact.parameter_methods:
            handed = argument(call, position, name)
            if handed is None or not prepared(handed):
                continue
            phrase = dict(_registrations(index, handed, core)).get(method)
            if phrase:
                yield call, (
                    f"`{snippet(call)}` hands the prepared model to "
                    f"`{fact.name}` in {fact.file}, whose `{name}.{method}(...)` "
                    f"(line {line}) runs {phrase}"
                )
                break


def _registrations(
    index: ModuleIndex,
    value: cst.BaseExpression,
    core: Callable[[cst.BaseExpression], cst.BaseExpression],
) -> tuple[tuple[str, str], ...]:
    """The registering methods of the class ``value`` (a name bound to a
    construction of a local module's class, or the construction) builds."""
    key: Key | None = index.key(value)
    values = index.values.get(key, []) if key is not None else [value]
    found: list[tuple[str, str]] = []
    for bound in values:
        inner = core(bound)
        if not isinstance(inner, cst.Call):
            continue
        fact = index.helper(inner.func)
        if fact is not None and fact.kind == "class":
            found += fact.late_registrations
    return tuple(found)
