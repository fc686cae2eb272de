"""Random draws this file makes through its local modules (``HelperFact.draws``,
found by ``project_draws``): where a training step calls an imported function
or a method of an imported object that draws (``fake_A_buffer.push_and_pop(x)``
with ``ReplayBuffer`` from ``utils.py``), runs a model of another module whose
``forward`` draws, or where the file builds a data loader whose dataset (or
the helper that builds it) draws for each sample, or whose ``collate_fn`` (an
imported function, or an instance of an imported class whose ``__call__``
draws) draws for each batch; and where, between training epochs, the file
hands one of its data loaders to an imported function that draws (an
evaluation that samples predictions over a sharded test loader): each process
draws for its own share, and the draws move torch's random state away from the
original's, which decides the next epoch's shuffled order. Also where the file
hands a model whose class draws in its ``forward`` to an imported function that
trains it (``train_one_epoch(model, ...)`` of a reference engine.py).

AM020 reports what this module finds; each answer names the helper, its file
and its draw.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from .analysis import ModuleIndex
from .draw_guards import first_draw
from .model_methods import held_instances, training_step
from .names import DATALOADER_CALLS
from .project_facts import HelperFact
from .subtrees import findall

#: What a data loader runs of its dataset for each sample (or stream).
_SAMPLE_METHODS = ("__getitem__", "__iter__")


def step_draw(index: ModuleIndex, call: cst.Call) -> tuple[str, str] | None:
    """(what draws, spelled for a finding; its draw) for a call a training step
    makes of an imported helper that draws; None otherwise."""
    if not index.project or not any(
        training_step(index, path)
        or _wrapped_step(index, path)
        or trainer_step(index, path)
        for path in index.loop_paths(call)
    ):
        return None
    fact = index.helper(call.func)
    if fact is not None and fact.kind == "function" and fact.draws:
        draw = helper_draw(fact, call)
        return (fact.where, draw) if draw else None
    func = call.func
    if isinstance(func, cst.Attribute):
        receiver, method = func.value, func.attr.value
    else:
        receiver, method = func, "forward"
    facts = set(instance_facts(index, receiver))
    key = index.key(receiver)
    if key is not None:
        # `model(samples)` of a parameter every batch call hands a model of a
        # helper module (MAE's train_one_epoch, given mae_vit_...(...) by main.py)
        from .project_callers import caller_model_class

        handed = caller_model_class(index, key)
        if handed is not None:
            facts.add(handed)
    for found in sorted(facts, key=lambda f: f.name):
        draws = dict(found.draws)
        for name in (method, "__call__") if method == "forward" else (method,):
            if name in draws:
                return f"`{found.name}.{name}` in {found.file}", draws[name]
    return None


def helper_draw(fact: HelperFact, call: cst.Call) -> str:
    """The first draw a call of the function ``fact`` may make: any of its
    draws, but for one a test of its parameters guards that ``call``'s
    arguments prove false (``HelperFact.guarded_draws``); ""."""
    if fact.guarded_draws:
        return first_draw(fact.guarded_draws, call)
    return fact.draws[0][1] if fact.draws else ""


def _wrapped_step(index: ModuleIndex, path: tuple[cst.For | cst.While, ...]) -> bool:
    """Is a chain of loops a training step whose batches a wrapper hands on from
    a data loader: a loop that runs a backward, and a ``for`` over a call handed
    a loader (``metric_logger.log_every(data_loader, print_freq, header)`` of
    the reference scripts' utils.py, a prefetcher)?"""
    return any(index.runs_backward(loop.body) for loop in path) and any(
        isinstance(loop, cst.For)
        and isinstance(iterated := _unenumerated(index, loop.iter), cst.Call)
        and any(
            a.keyword is None and index.loader_loop(a.value)[0] for a in iterated.args
        )
        for loop in path
    )


def trainer_step(index: ModuleIndex, path: tuple[cst.For | cst.While, ...]) -> bool:
    """Is a chain of loops a training step whose backward runs in an object of
    another module: a loop over a data loader that calls a method of an
    instance of an imported class that trains models it builds itself
    (basicsr's ``model.feed_data(train_data)`` then
    ``model.optimize_parameters(current_iter)`` on a ``RealESRGANModel``)?"""
    if not any(index.reads_loader(loop) for loop in path):
        return False
    return any(
        fact.migrated_trainer or fact.trains_own
        for loop in path
        for call in findall(loop.body, m.Call(func=m.Attribute()))
        for fact in instance_facts(index, call.func.value)  # type: ignore[attr-defined]
    )


def _unenumerated(index: ModuleIndex, expr: cst.BaseExpression) -> cst.BaseExpression:
    """``wrapper(loader)`` of ``enumerate(wrapper(loader))`` (DINO's
    ``enumerate(metric_logger.log_every(data_loader, 10, header))``)."""
    if (
        isinstance(expr, cst.Call)
        and expr.args
        and index.qualnames(expr.func) & {"builtins.enumerate"}
    ):
        return expr.args[0].value
    return expr


def loader_draw(index: ModuleIndex, call: cst.Call) -> tuple[str, str] | None:
    """(what draws, its draw) for a data loader this file builds over an instance
    of an imported dataset class that draws for each sample (in ``__getitem__``
    or ``__iter__``) or builds a random augmentation, and for a call of an
    imported helper that builds a loader (or a tuple or dict of them) with a
    random augmentation. Data drawn once while a loader is built (``TensorDataset(
    torch.randn(n, 4))``) is setup, the same on every process: not counted."""
    if not index.project:
        return None
    fact = index.helper(call.func)
    if fact is not None and fact.kind == "function":
        if fact.returns == "loader" or fact.container:
            # a torchvision augmentation it builds, or a dataset class of the
            # project it builds that draws for each sample (`loader_sample_draws`)
            draw = fact.augmentation or fact.sample_draws
            return (fact.where, draw) if draw else None
        return None
    if not any(q in DATALOADER_CALLS for q in index.qualnames(call.func)):
        return None
    dataset = next(
        (
            a.value
            for i, a in enumerate(call.args)
            if (a.keyword is None and i == 0)
            or (a.keyword is not None and a.keyword.value == "dataset")
        ),
        None,
    )
    for found in sorted(instance_facts(index, dataset), key=lambda f: f.name):
        draws = dict(found.draws)
        for name in _SAMPLE_METHODS:
            if name in draws:
                return f"`{found.name}.{name}` in {found.file}", draws[name]
        if found.augmentation:
            return f"`{found.name}` in {found.file}", found.augmentation
    return _collate_draw(index, call)


def transform_draw(index: ModuleIndex, call: cst.Call) -> tuple[str, str] | None:
    """(what draws, its draw) for an instance of an imported class, not a model,
    whose ``__call__`` draws: a transform of the project's own (torchvision
    references' transforms.py, ``T.RandomCrop(size)`` cropping an image and its
    mask at ``random.randint`` offsets), built in a file that builds a data
    loader, which applies it to each process's share of the samples. Where the
    dataset gets it (a ``T.Compose`` handed through ``get_dataset(...,
    transform)``) need not be followed: as with torchvision's augmentations,
    building it in the loader's file is enough. Also a call of a function of the
    project that builds such a transform, or a torchvision random augmentation
    (``HelperFact.augmentation``), and is not a loader or model factory."""
    if not index.project:
        return None
    fact = index.helper(call.func)
    if (
        fact is not None
        and fact.kind == "function"
        and fact.returns not in ("loader", "model")
        and not fact.container
    ):
        # a transform factory (`get_train_transforms()`, `make_transform(...)` of
        # dataset/utils.py): the augmentation it builds, torchvision's or a class
        # of the project whose call draws, unless this call's arguments prove it
        # built under a false test (`make_transform(..., is_train=False)`)
        if fact.guarded_augmentations:
            draw = first_draw(fact.guarded_augmentations, call)
        else:
            draw = fact.augmentation
        if not draw:
            return None
        return f"built by {fact.where}", draw
    if fact is None or fact.kind != "class" or fact.returns == "model":
        return None
    draw = dict(fact.draws).get("__call__")
    if not draw or fact in _collate_classes(index):
        return None  # a loader's collate_fn: reported at the loader
    return f"`{fact.name}.__call__` in {fact.file}", draw


def _collate_classes(index: ModuleIndex) -> set[HelperFact]:
    """The imported classes an instance of which a data loader of this file
    takes as its ``collate_fn`` (``_collate_draw`` reports their draws)."""
    return {
        fact
        for call in index.calls
        if any(q in DATALOADER_CALLS for q in index.qualnames(call.func))
        for arg in call.args
        if arg.keyword is not None and arg.keyword.value == "collate_fn"
        for fact in instance_facts(index, arg.value)
    }


def _collate_draw(index: ModuleIndex, call: cst.Call) -> tuple[str, str] | None:
    """The loader's ``collate_fn=`` when it is an imported function that draws,
    or an instance of an imported class whose ``__call__`` draws (Hugging Face's
    DataCollatorForLanguageModeling-style masking, ``torch.bernoulli`` over the
    batch's tokens in a collator of ``collate.py``): it runs for each batch of
    each process's own share."""
    collate = next(
        (
            a.value
            for a in call.args
            if a.keyword is not None and a.keyword.value == "collate_fn"
        ),
        None,
    )
    if collate is None:
        return None
    fact = index.helper(collate)
    if fact is not None and fact.kind == "function" and fact.draws:
        return f"the `collate_fn` {fact.where}", fact.draws[0][1]
    if isinstance(collate, cst.Lambda):
        # `collate_fn=lambda x: data_processing(x, "train")` with the function
        # imported (AssemblyAI's speech tutorial): the lambda runs it per batch
        for inner in findall(collate.body, m.Call()):
            fact = index.helper(inner.func)  # type: ignore[attr-defined]
            if fact is None or fact.kind != "function" or not fact.draws:
                continue
            # not a draw under `if data_type == "train":` that the lambda's
            # `data_processing(x, "valid")` proves false (`draw_guards`)
            draw = helper_draw(fact, inner)  # type: ignore[arg-type]
            if draw:
                return f"the `collate_fn` (a lambda that calls {fact.where})", draw
    for found in sorted(instance_facts(index, collate), key=lambda f: f.name):
        draws = dict(found.draws)
        if "__call__" in draws:
            return (
                f"the `collate_fn` `{found.name}.__call__` in {found.file}",
                draws["__call__"],
            )
    return None


def instance_facts(
    index: ModuleIndex, expr: cst.BaseExpression | None, depth: int = 0
) -> set[HelperFact]:
    """The imported classes whose instance ``expr`` may hold: ``buffer`` bound to
    ``ReplayBuffer()``, ``self.pool`` set so, a model built by an imported
    factory, through ``.to(device)``, ``accel.prepare_model(...)`` and the
    parameters of a local function its callers hand one."""

    def imported(call: cst.Call) -> set[HelperFact] | None:
        fact = index.helper(call.func)
        if fact is None:
            return None
        if fact.kind == "class":
            return {fact}
        return {fact.model_class} if fact.model_class is not None else set()

    return held_instances(index, expr, imported, depth)


def sampler_draw(index: ModuleIndex, call: cst.Call) -> tuple[str, str] | None:
    """(the sampler's ``__iter__``, its draw) for a data loader this file builds
    with ``sampler=`` / ``batch_sampler=`` an instance of an imported class whose
    ``__iter__`` draws from torch's global random state (DeepAR's
    ``WeightedSampler`` with ``torch.multinomial``); None otherwise."""
    if not index.project or not any(
        q in DATALOADER_CALLS for q in index.qualnames(call.func)
    ):
        return None
    for arg in call.args:
        if arg.keyword is None or arg.keyword.value not in (
            "sampler",
            "batch_sampler",
        ):
            continue
        for found in sorted(instance_facts(index, arg.value), key=lambda f: f.name):
            draw = dict(found.draws).get("__iter__", "")
            if draw.startswith("`torch."):
                return f"`{found.name}.__iter__` in {found.file}", draw
    return None


def epoch_draw(index: ModuleIndex, call: cst.Call) -> tuple[str, str, str] | None:
    """(the helper, its draw, the loader handed to it) for a call of an imported
    function that draws from torch's global random state (``torch.randn_like``,
    not ``random.randint`` or ``np.random.rand``, which leave the loader's
    shuffle alone; not a draw under ``if augment:`` with ``augment=False`` that
    the call does not pass: ``HelperFact.torch_draws``), made in a loop that
    trains (an epoch loop) but not in its training step, and handed a data loader this file builds (DeepAR-style
    ``evaluate(model, test_loader)`` sampling predictions); None otherwise.
    Under the runtime that loader is sharded, so each process draws for its
    own share; a shuffled loader's next epoch is drawn from rank 0's random
    state, which those draws have moved away from the original's."""
    if not index.project:
        return None
    fact = index.helper(call.func)
    if fact is None or fact.kind != "function":
        return None
    draw = next((d for d, *guard in fact.torch_draws if _runs(call, *guard)), None)
    if draw is None:
        return None
    paths = index.loop_paths(call)
    if not any(index.runs_backward(loop.body) for path in paths for loop in path):
        return None
    for arg in call.args:
        key = index.key(arg.value)
        values = index.values.get(key, []) if key is not None else []
        if any(_builds_loader(index, value) for value in values):
            return fact.where, draw, cst.Module([]).code_for_node(arg.value)
    return None


def trained_model_draw(
    index: ModuleIndex, call: cst.Call
) -> tuple[str, str, str] | None:
    """(what draws, its draw, the model handed) for a call of an imported
    function that trains the model it is handed (``HelperFact.trains``:
    torchvision's reference ``train_one_epoch(model, optimizer, data_loader,
    ...)`` in engine.py) where that model is an instance of an imported class
    whose ``forward`` (or ``__call__``) draws: the step that runs it is not in
    this file, so no call of this file's steps shows the draw; None otherwise."""
    if not index.project:
        return None
    fact = index.helper(call.func)
    if fact is None or fact.kind != "function" or not fact.trains:
        return None
    name, position = fact.trained_parameter
    if not name:
        return None
    positional = [a for a in call.args if a.keyword is None and not a.star]
    arg = next(
        (
            a.value
            for a in call.args
            if a.keyword is not None and a.keyword.value == name
        ),
        positional[position].value if 0 <= position < len(positional) else None,
    )
    if arg is None:
        return None
    for found in sorted(instance_facts(index, arg), key=lambda f: f.name):
        draws = dict(found.draws)
        for method in ("forward", "__call__"):
            if method in draws:
                where = f"`{found.name}.{method}` in {found.file}"
                return where, draws[method], cst.Module([]).code_for_node(arg)
    return None


def _runs(call: cst.Call, parameter: str, position: int) -> bool:
    """May a draw guarded by ``if parameter:`` (a falsy default) run for
    ``call``: unguarded, or the call passes the parameter (by name, at its
    position, or through ``*args``/``**kwargs``)?"""
    if not parameter:
        return True
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return (
        any(a.star for a in call.args)
        or any(
            a.keyword is not None and a.keyword.value == parameter for a in call.args
        )
        or 0 <= position < len(positional)
    )


def _builds_loader(index: ModuleIndex, value: cst.BaseExpression | None) -> bool:
    """``DataLoader(...)``, or ``accel.prepare_dataloader(...)`` (AM006 has run)."""
    return isinstance(value, cst.Call) and (
        index.is_runtime_call(value, "prepare_dataloader")
        or any(q in DATALOADER_CALLS for q in index.qualnames(value.func))
    )


def makes_loader(index: ModuleIndex) -> bool:
    """Does this file build a data loader, itself or by a call of a local
    helper that returns one (``make_loader(Shapes(n, transform=RandomMirror()))``
    with ``make_loader`` in data.py)? A random augmentation built here is then
    applied by a loader to each process's share of the samples."""
    from .data_pipeline import builds_loader

    if builds_loader(index):
        return True
    return any(
        (fact := index.helper(call.func)) is not None
        and fact.kind == "function"
        and (fact.returns == "loader" or fact.container)
        for call in index.calls
    )
