"""Training batches taken from a source that no process splits (AM019's
``unsplit_sources``), in a file whose loops read data.

A migrated file whose model is prepared (DDP, FSDP) but whose training loop
steps through something that is not a loader ``accel.prepare_dataloader``
wraps trains every process on every batch: the averaged gradient of equal
batches is the original's, so the run matches, but it does the work of one
process N times over, and nothing tells the user. Four real shapes:

- KaiyangZhou/pytorch-center-loss: ``trainloader, testloader =
  dataset.trainloader, dataset.testloader``, the loaders held as attributes
  of an object a helper module's ``datasets.create(...)`` builds (its
  DataLoaders are built in that module, never written);
- DeepKnowledgeTracing-DKT-Pytorch: ``train_epoch(model, trainLoaders[i],
  ...)``, a loader taken out of the lists a helper's ``getLoader`` returns
  (in batch mode: a parameter every call from the batch's other files hands
  such a list);
- LSTNet: ``for X, Y in data.get_batches(X, Y, batch_size, True)``, a
  generator method of a helper's ``Data_utility`` object;
- SASRec: ``u, seq, pos, neg = sampler.next_batch()`` in a ``for`` over
  ``range(num_batch)``, from an instance of a helper module's sampler class;
- Graph-WaveNet (batch mode): ``for iter, (x, y) in
  enumerate(dataloader["train_loader"].get_iterator())`` handing each batch
  to ``engine.train(...)``, the step of engine.py's ``trainer``, which builds
  its model and optimizer itself (the backward is in that file, the loop in
  this one; ``_trainer_step``), the loader object an item of the dict a
  helper's ``load_dataset`` returns.

A source counts only when every value the loop's iterable may hold is
followed to an expression that is neither a data loader (sharded, or left
whole and reported by AM006), nor a call of this file's own functions or
classes (which AM006 may prepare inside), nor a parameter whose callers are
not known: an unknown is never reported. Static only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .batch_iterators import unsplit_iterator
from .index_syntax import attr_chain
from .names import DATALOADER_CALLS
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import ModuleIndex

#: Rounds of following a value through variables and parameters.
_DEPTH = 6


@dataclass(frozen=True, eq=False)
class UnsplitSource:
    """A training loop and the source its batches come from."""

    #: The loop to report (the ``for`` over the source, or the step's loop).
    loop: cst.For | cst.While
    #: The expression the batches come from (``dataset.trainloader``,
    #: ``data.get_batches(...)``, ``sampler.next_batch()``).
    origin: cst.BaseExpression
    #: What it is, as a phrase after its code ("" when the code says it).
    made: str = ""


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


@lru_cache(maxsize=8)
def unsplit_sources(index: ModuleIndex) -> tuple[UnsplitSource, ...]:
    """Each loop that runs a backward on batches no process splits, once."""
    found: dict[cst.CSTNode, UnsplitSource] = {}
    for call in index.calls:
        driven = _trainer_step(index, call)
        if not (driven or index.is_backward_call(call)):
            continue
        for path in index.loop_paths(call):
            if not path or any(index.reads_loader(loop) for loop in path):
                continue
            reading = [loop for loop in path if not index.reads_no_data(loop)]
            if reading:
                loop = reading[0]
                if loop in found or not isinstance(loop, cst.For):
                    continue
                origins = _origins(index, loop.iter, 0)
                if origins:
                    found[loop] = UnsplitSource(loop, origins[0])
                continue
            if driven:
                continue  # (a step of another module's object: its own draws)
            sampled = _sampled_batch(index, path[0])
            if sampled is not None and path[0] not in found:
                found[path[0]] = sampled
    return tuple(found.values())


def _trainer_step(index: ModuleIndex, call: cst.Call) -> bool:
    """Is ``call`` a training step this file drives on an object of another
    file of the batch: a method that runs a backward (``step_methods``) of an
    instance of a class that trains models it builds itself
    (``HelperFact.migrated_trainer``)? Graph-WaveNet's ``engine.train(trainx,
    trainy[:, 0, :, :])``, with ``engine = trainer(scaler, ...)`` of
    engine.py, whose ``__init__`` builds the model and the optimizer."""
    from .imported_draws import instance_facts

    func = _bound_method(index, call.func)
    if not index.project or not isinstance(func, cst.Attribute):
        return False
    return any(
        fact.migrated_trainer
        and fact.batch_migrated
        and func.attr.value in fact.step_methods
        for fact in instance_facts(index, func.value)
    )


def _bound_method(index: ModuleIndex, func: cst.BaseExpression) -> cst.BaseExpression:
    """``func``, or the one value of the name it is where that value is an
    attribute: ``train_step = engine.train`` then ``train_step(x, y)``, or
    ``train_iter = dataloader["train_loader"].get_iterator`` then
    ``enumerate(train_iter())`` (a bound method, called later on the object it
    was read off)."""
    if isinstance(func, cst.Name):
        key = index.key(func)
        values = index.values.get(key, []) if key is not None else []
        if len(values) == 1 and isinstance(values[0], cst.Attribute):
            return values[0]
    return func


def _origins(
    index: ModuleIndex, expr: cst.BaseExpression, depth: int
) -> list[cst.BaseExpression] | None:
    """The expressions ``expr`` may hold, followed through loop wrappers,
    variables and parameters, when every one of them is a source that is not a
    loader (see the module); None when one is a loader or is not known."""
    if depth > _DEPTH:
        return None
    inner = index._loop_wrapped(expr)
    if inner is not None:
        return _origins(index, inner, depth + 1)
    if isinstance(expr, (cst.Name, cst.Attribute)):
        if index.holds_tagged(expr, index.loaders) or index.holds_tagged(
            expr, index.loader_containers
        ):
            return None
        key = index.key(expr)
        if key is None:
            if isinstance(expr, cst.Attribute) and _foreign_object(index, expr):
                return [expr]
            return None
        from .batches import possible_values

        values = possible_values(index, expr)
        if values is None:
            return _handed_by_callers(index, expr, key)
        found: list[cst.BaseExpression] = []
        for value in values:
            inner_found = None if value is None else _origins(index, value, depth + 1)
            if inner_found is None:
                return None
            found += inner_found
        return found or None
    if isinstance(expr, cst.Call):
        if _loader_call(index, expr) or index.local_function(expr.func) is not None:
            return None
        if index.local_class(expr.func) is not None:
            return None
        func = _bound_method(index, expr.func)
        if any(_may_hold_loader(index, a.value, 0) for a in expr.args):
            # a wrapper that may read a loader (MetricLogger.log_every(data_loader,
            # ...), a prefetcher): its batches may be a sharded loader's
            return None
        if isinstance(func, cst.Attribute) and _foreign_object(index, func):
            return [expr]
        return None
    if isinstance(expr, cst.Subscript):
        if index._loader_item(expr):  # type: ignore[attr-defined]
            return None
        base = expr.value
        if isinstance(base, (cst.Name, cst.Attribute)) and (
            _origins(index, base, depth + 1) is not None
        ):
            return [expr]
    return None


def _may_hold_loader(index: ModuleIndex, expr: cst.BaseExpression, depth: int) -> bool:
    """May ``expr``, an argument of a call the batches come from, be a data
    loader (or a container of them), or is it not known? Literals, tensors'
    items and attributes of objects this file does not set are not."""
    from .batches import possible_values

    if depth > _DEPTH:
        return True
    if isinstance(expr, (cst.BaseNumber, cst.BaseString)) or m.matches(
        expr, m.Name("True") | m.Name("False") | m.Name("None")
    ):
        return False
    if isinstance(expr, cst.Call):
        return _loader_call(index, expr) or index._loop_wrapped(expr) is not None
    if isinstance(expr, cst.Subscript):
        return index._loader_item(expr) or _may_hold_loader(  # type: ignore[attr-defined]
            index, expr.value, depth + 1
        )
    if not isinstance(expr, (cst.Name, cst.Attribute)):
        return True
    if index.holds_tagged(expr, index.loaders) or index.holds_tagged(
        expr, index.loader_containers
    ):
        return True
    if index.key(expr) is None:
        return not isinstance(expr, cst.Attribute) or _root_set_here(index, expr)
    values = possible_values(index, expr)
    if not values:
        return True
    return any(v is None or _may_hold_loader(index, v, depth + 1) for v in values)


def _root_set_here(index: ModuleIndex, attribute: cst.Attribute) -> bool:
    """Does this file set ``attribute`` or an attribute it is read through
    (``dataset.trainloader = ...`` for ``dataset.trainloader``)? Then what it
    holds is not followed. Not known for a chain of anything but names."""
    chain = attr_chain(attribute)
    if chain is None:
        return True
    parts = chain.split(".")
    read = {".".join(parts[:n]) for n in range(2, len(parts) + 1)}
    for target in findall(index.module, m.AssignTarget()):
        assert isinstance(target, cst.AssignTarget)
        if attr_chain(target.target) in read:
            return True
    return False


def _loader_call(index: ModuleIndex, call: cst.Call) -> bool:
    from .patterns import is_loader_seed

    return bool(
        index.qualnames(call.func) & DATALOADER_CALLS
        or is_loader_seed(index, call)
        or index.is_runtime_call(call, "prepare_dataloader", "prepare_dataloaders")
    )


def _foreign_object(index: ModuleIndex, attribute: cst.Attribute) -> bool:
    """Is ``attribute`` (``dataset.trainloader``, ``data.get_batches``) read off
    an object whose every value is a call of another module (not this file's
    own class or function, not a loader), and whose attributes this file never
    sets?"""

    root: cst.BaseExpression = attribute
    keyed = False
    while isinstance(root, cst.Attribute) or _keyed_item(root):
        keyed = keyed or isinstance(root, cst.Subscript)
        root = root.value  # type: ignore[attr-defined]
    if not isinstance(root, cst.Name) or root.value == "self":
        return False
    if keyed:
        # `data["train_loader"].get_iterator()` (Graph-WaveNet's dict of its
        # own loader objects): not one of loaders, nor written here
        if _root_written(index, root) or index.holds_tagged(
            root, index.loader_containers
        ):
            return False
    elif _root_set_here(index, attribute) or attr_chain(attribute) is None:
        return False  # `dataset.trainloader = ...` here: not followed
    values = _object_values(index, root, 0)
    if not values:
        return False
    for value in values:
        if (
            index.local_function(value.func) is not None
            or index.local_class(value.func) is not None
            or _loader_call(index, value)
        ):
            return False
    return True


def _keyed_item(expr: cst.BaseExpression) -> bool:
    """``data["train_loader"]``: an item picked by one string or number."""
    if not isinstance(expr, cst.Subscript) or len(expr.slice) != 1:
        return False
    index = expr.slice[0].slice
    return isinstance(index, cst.Index) and isinstance(
        index.value, (cst.SimpleString, cst.Integer)
    )


def _root_written(index: ModuleIndex, root: cst.Name) -> bool:
    """Does this file set an item or an attribute of a variable spelled as
    ``root`` (``data["x"] = ...``, ``data.x = ...``), in any scope? Then what
    its items hold is not followed (``_object_values`` then asks that the
    variable hold calls only)."""
    for target in findall(index.module, m.AssignTarget()):
        assert isinstance(target, cst.AssignTarget)
        written = target.target
        while isinstance(written, (cst.Attribute, cst.Subscript)):
            written = written.value
            if isinstance(written, cst.Name) and written.value == root.value:
                return True
    return False


def _object_values(
    index: ModuleIndex, name: cst.Name, depth: int
) -> list[cst.Call] | None:
    """The calls that make the object ``name`` may hold, followed through
    variables and parameters (``train(Data, ...)``); None when one is not a
    call of a named function or class, or is not known."""
    from .batches import possible_values

    if depth > _DEPTH:
        return None
    values = possible_values(index, name)
    if not values:
        return None
    found: list[cst.Call] = []
    for value in values:
        if isinstance(value, cst.Name):
            inner = _object_values(index, value, depth + 1)
            if inner is None:
                return None
            found += inner
        elif isinstance(value, cst.Call) and isinstance(
            value.func, (cst.Name, cst.Attribute)
        ):
            found.append(value)
        else:
            return None
    return found


def _handed_by_callers(
    index: ModuleIndex, expr: cst.BaseExpression, key: object
) -> list[cst.BaseExpression] | None:
    """A parameter that calls from the batch's other files (at least one, and
    none here) hand, none of them a loader or a container of loaders (those
    are sharded where they are built): what they hand is not split."""
    from .project_callers import _called_functions

    if not isinstance(expr, cst.Name) or not index.project.callers:
        return None
    for name, function in _called_functions(index):
        sites = index.project.callers_of(name)
        if not sites or index.call_sites(function):
            continue
        if index.function_scope_key(function, expr.value) != key:
            continue
        kinds = {site.kind(expr.value) for site in sites}
        if kinds == {""} and not any(site.iterator(expr.value) for site in sites):
            return [expr]
        return None
    return None


def _sampled_batch(
    index: ModuleIndex, loop: cst.For | cst.While
) -> UnsplitSource | None:
    """A step under loops that read no data, whose batch comes from a method of
    an object of a helper module's class handed no loader (SASRec's
    ``u, seq, pos, neg = sampler.next_batch()``; ``batch_iterators``)."""
    for statement in findall(loop.body, m.Assign(value=m.Call(func=m.Attribute()))):
        assert isinstance(statement, cst.Assign)
        call = statement.value
        assert isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
        receiver = call.func.value
        if not isinstance(receiver, cst.Name):
            continue
        made = unsplit_iterator(index, receiver)
        if made is not None:
            return UnsplitSource(loop, call, f"on `{receiver.value}`, {made}")
    return None
