"""Where a trained model comes from: what AM004 needs beyond ``ModuleIndex``.

- ``parameter_calls``: the ``x.parameters()`` calls whose parameters an optimizer
  receives, also through variables (``params = list(enc.parameters()) +
  list(dec.parameters())``, ``params += ...``, ``itertools.chain(...)``).
- ``element_containers``: loop and comprehension variables that step through a
  list of models (``for net in nets``, ``[SGD(n.parameters()) for n in nets]``).
- ``binding_story``: a true sentence on how a variable is bound, for a
  needs-review message (imported, a parameter, unpacked, built in a form that
  cannot be wrapped).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .analysis import Key, ModuleIndex, method_call, variable_names
from .scopes import Assignment, ImportAssignment
from .subtrees import findall

if TYPE_CHECKING:
    from .project_facts import HelperFact

_PARAMETERS = m.Call(
    func=m.Attribute(attr=m.Name("parameters") | m.Name("named_parameters"))
)
#: How far ``opt = SGD(params)`` is followed back through variables.
_DEPTH = 4
_SNIPPET = 60


def extra_values(index: ModuleIndex) -> dict[Key, list[cst.BaseExpression]]:
    """What ``x += value``, ``x.extend(value)`` and ``x.append(value)`` add to ``x``
    (the collector records plain assignments only)."""
    found: dict[Key, list[cst.BaseExpression]] = defaultdict(list)
    for key, nodes in index.augmented.items():
        found[key].extend(node.value for node in nodes)
    for call in index.calls:
        attribute = method_call(call, "extend", "append", "add_param_group")
        if attribute is not None and call.args:
            key = index.key(attribute.value)
            if key is not None:
                found[key].extend(a.value for a in call.args)
    return found


def parameter_calls(
    index: ModuleIndex,
    call: cst.Call,
    extra: dict[Key, list[cst.BaseExpression]],
    seen: set[Key] | None = None,
) -> list[cst.Call]:
    """The ``.parameters()`` calls in an optimizer's arguments, and in the values
    of the variables they name (``seen``, when given, receives those variables)."""
    found: list[cst.Call] = []
    seen = set() if seen is None else seen

    def walk(node: cst.CSTNode, depth: int) -> None:
        for inner in findall(node, _PARAMETERS):
            if inner not in found:
                found.append(inner)  # type: ignore[arg-type]
        if depth >= _DEPTH:
            return
        for name in variable_names(node):
            key = index.key(name)
            if key is None or key in seen:
                continue
            seen.add(key)
            for value in [*index.values.get(key, ()), *extra.get(key, ())]:
                if value is not None:
                    walk(value, depth + 1)

    for inner in findall(call, _PARAMETERS):
        found.append(inner)  # type: ignore[arg-type]
    params = next(
        (
            a.value
            for a in call.args
            if a.keyword is None or a.keyword.value == "params"
        ),
        None,
    )
    if params is not None:
        # a variable, a list of groups, list(a) + list(b), itertools.chain(a, b)...
        walk(params, 0)
    return found


def element_containers(index: ModuleIndex) -> dict[Key, Key]:
    """Variables bound by ``for x in xs``, ``for i, x in enumerate(xs)``,
    ``for x, y in zip(xs, ys)`` (statements and comprehensions), and the variable
    ``xs`` each steps through."""
    found: dict[Key, Key] = {}
    loops: list[tuple[cst.BaseExpression, cst.BaseExpression]] = [
        (loop.target, loop.iter) for loop in index.for_loops
    ]
    loops += [
        (c.target, c.iter)  # type: ignore[attr-defined]
        for c in findall(index.module, m.CompFor())
    ]
    for target, iterable in loops:
        for element, source in _pairs(index, target, iterable):
            element_key, source_key = index.key(element), index.key(source)
            if element_key is not None and source_key is not None:
                found[element_key] = source_key
    return found


def _pairs(
    index: ModuleIndex, target: cst.BaseExpression, iterable: cst.BaseExpression
) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    if isinstance(iterable, cst.Name) or index.key(iterable) is not None:
        # `for net in nets`, and `for net in self.nets` (a list an instance holds)
        return [(target, iterable)]
    if not isinstance(iterable, cst.Call) or not isinstance(
        target, (cst.Tuple, cst.List)
    ):
        return []
    names = index.qualnames(iterable.func)
    positional = [a.value for a in iterable.args if a.keyword is None and not a.star]
    elements = [e.value for e in target.elements]
    if "builtins.enumerate" in names and len(positional) == 1 and len(elements) == 2:
        return [(elements[1], positional[0])]
    if "builtins.zip" in names and len(positional) == len(elements):
        return list(zip(elements, positional, strict=True))
    return []


def root_key(index: ModuleIndex, expr: cst.BaseExpression) -> Key | None:
    """The variable ``model`` of ``model.encoder`` or ``model[0]`` (a part of it)."""
    while True:
        key = index.key(expr)
        if key is not None or not isinstance(expr, (cst.Attribute, cst.Subscript)):
            return key
        expr = expr.value


def list_items(value: cst.BaseExpression | None) -> list[cst.BaseExpression]:
    """What a list or tuple display (no ``*``) or a list comprehension holds:
    its elements, or its one element expression; [] for anything else."""
    if isinstance(value, (cst.List, cst.Tuple)):
        if any(isinstance(e, cst.StarredElement) for e in value.elements):
            return []
        return [e.value for e in value.elements]
    if isinstance(value, cst.ListComp):
        return [value.elt]
    return []


def list_variables(index: ModuleIndex) -> set[Key]:
    """Variables assigned a list or tuple display or a list comprehension."""
    return {
        key
        for key, values in index.values.items()
        if any(isinstance(v, (cst.List, cst.Tuple, cst.ListComp)) for v in values)
    }


def returns_of(
    index: ModuleIndex, function: cst.FunctionDef
) -> list[cst.BaseExpression | None]:
    """The values ``function`` returns (not those of functions defined in it)."""
    return [
        r.value  # type: ignore[attr-defined]
        for r in findall(function.body, m.Return())
        if index.enclosing_function(r) is function
    ]


def snippet(node: cst.CSTNode) -> str:
    code = " ".join(cst.Module([]).code_for_node(node).split())
    return code if len(code) <= _SNIPPET else code[: _SNIPPET - 3] + "..."


def binding_story(
    index: ModuleIndex, key: Key, line: Callable[[cst.CSTNode], int]
) -> tuple[cst.CSTNode | None, str]:
    """Where ``key`` is bound and a true sentence saying how, when it is not one
    of the plain ``x = <call>`` forms AM004 wraps. ``line``: a node's first line
    in the user's file (positions belong to the rule)."""
    scope, name = key
    assignments = list(scope[name]) if hasattr(scope, "__getitem__") else []  # type: ignore[index]
    for assignment in assignments:
        node = assignment.node
        if isinstance(assignment, ImportAssignment):
            return node, (
                f"`{name}` comes from an import (`{snippet(node)}`, line {line(node)}), "
                f"so it is built in another file; wrap it with accel.prepare_model(...) "
                f"where it is built, or right after the import (`{name} = accel.prepare_model({name})`)"
            )
        if isinstance(node, cst.Param):
            function = index.enclosing_function(node)
            where = (
                f"`{function.name.value}()`" if function is not None else "a function"
            )
            return node, (
                f"`{name}` is a parameter of {where} (line {line(node)}) and no call "
                f"in this file passes it a model accel-migrate prepares; wrap the model "
                f"with accel.prepare_model(...) where it is built"
            )
    for assignment in assignments:
        node = assignment.node
        if isinstance(assignment, Assignment) and isinstance(node, cst.Name):
            found = _statement(index, node)
            if found is not None:
                statement, code = found
                return statement, (
                    f"`{name}` is bound in this file at line {line(statement)} in a form "
                    f"accel-migrate cannot wrap (`{code}`); wrap the model "
                    f"with accel.prepare_model(...) where it is built"
                )
    return None, (
        f"`{name}` is trained but accel-migrate cannot find where it is built; wrap "
        f"the model with accel.prepare_model(...) where it is built"
    )


def _statement(index: ModuleIndex, node: cst.CSTNode) -> tuple[cst.CSTNode, str] | None:
    """The assignment, ``for`` or ``with`` that binds ``node``, and its code (a
    loop's header only)."""
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, (cst.For, cst.CompFor)):
            code = f"for {snippet(ancestor.target)} in {snippet(ancestor.iter)}"
            return ancestor, code
        if isinstance(
            ancestor, (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.WithItem)
        ):
            return ancestor, snippet(ancestor)
        if isinstance(ancestor, cst.BaseStatement):
            return ancestor, snippet(node)
    return None


#: The end of every blocking message of AM004.
ALL_OR_NOTHING = (
    ". Nothing in this file was migrated: a training setup is migrated whole or "
    "not at all (sharding its data and rewriting its backward without preparing "
    "the model would train an unsynchronised copy in each process)"
)


#: Methods a script calls on a model it trains (not `.parameters()`: a frozen
#: feature extractor is asked for them to turn requires_grad off).
MODEL_METHODS = ("train", "zero_grad")


class AllOrNothing:
    """AM004's blocking findings: a trained model it cannot show prepared leaves
    the whole file unchanged (``Rule.block``). A mixin of the rule: it reads the
    rule's analysis (``models``, ``optimized``, ``elements``...)."""

    def visit_Module(self, node: cst.Module) -> None:
        self._block_library_trainers()
        self._block_subclassed_trainers()
        for key, call in self._stepped_models.items():
            values = [v for v in self.index.values.get(key, []) if v is not None]
            place = (
                values[0] if values else binding_story(self.index, key, self._line)[0]
            )
            place = place or call
            method = self._optimizer_from_method(key)
            if method is not None:
                bound, _ = binding_story(self.index, key, self._line)
                story = (
                    f"it is bound at line {self._line(bound)}: `{snippet(bound)}`"
                    if bound is not None
                    else "it is not built in this file"
                )
                self.block(
                    method,
                    f"`{key[1]}` is a model (`{self._model_evidence[key]}`) called in "
                    f"a training loop (line {self._line(call)}) and stepped by the "
                    f"optimizer `{snippet(method)}` returns (line "
                    f"{self._line(method)}), a method of a class this file neither "
                    "defines nor imports, so accel-migrate cannot show that optimizer "
                    f"is over its parameters, nor prepare the model here ({story}); "
                    "wrap the model with accel.prepare_model(...) where it is built "
                    "and the optimizer with accel.prepare_optimizer(...)"
                    + ALL_OR_NOTHING,
                )
                continue
            self.block(
                place,
                f"`{key[1]}` is a model (`{self._model_evidence[key]}`) called in a "
                f"training loop (line {self._line(call)}), but its parameters reach no "
                "optimizer built in this file, so accel-migrate cannot tell how it is "
                "trained; wrap it with accel.prepare_model(...) where it is built "
                f"(line {self._line(place)}) and its optimizer with "
                "accel.prepare_optimizer(...)" + ALL_OR_NOTHING,
            )

    def _block_library_trainers(self) -> None:
        """``Trainer(config, model, dataset)`` of a local module whose class trains
        what it is handed (``library_trainers``): the setup is split across files,
        so this file is left whole, as the library's is. Not where the class's
        file is migrated in this batch too (``HelperFact.batch_migrated``): it
        learns from this file's call what it is handed (``project_callers``),
        and this file prepares the model where it builds it; if that file is
        left whole, so is this one (AM103), and the other way round."""
        seen: set[str] = set()
        for call in self.index.calls:
            fact = self.index.helper(call.func)
            if (
                fact is None
                or fact.kind not in ("class", "function")
                or not (fact.trains or fact.trains_own)
                or fact.collectives  # the library already runs the runtime's calls
                or (
                    fact.trains
                    and fact.batch_migrated
                    and (fact.kind == "class" or self._handed_prepared(call, fact))
                )
                or fact.where in seen
            ):
                continue
            seen.add(fact.where)
            if not fact.trains:
                self._block_own_trainer(call, fact)
                continue
            if fact.batch_migrated:
                self._block_unprepared_handed(call, fact)
                continue
            self.block(
                call,
                f"`{snippet(call)}` hands its arguments to {fact.where}, which "
                f"trains with them there: {fact.trains}. accel-migrate migrates a "
                "training setup one file at a time and does not prepare a model "
                f"across files, so {fact.file} is not migrated for this model; wrap "
                "the model with accel.prepare_model(...) where it is built, and in "
                f"{fact.file} its optimizer with accel.prepare_optimizer(...), the "
                "loader with accel.prepare_dataloader(...), the backward with "
                "accel.backward(...), and make the loss it hands back global "
                "(accel.global_loss) where it is logged. Nothing in this file was "
                f"migrated: while each process trains a full copy in {fact.file}, "
                "sharding this file's loaders, reducing its metrics or moving its "
                "logs and saves to the main process would mix a migrated half with "
                "an unmigrated one",
            )

    def _handed_model(
        self, call: cst.Call, fact: HelperFact
    ) -> cst.BaseExpression | None:
        """What ``call`` hands the parameter ``fact`` trains (None: not shown)."""
        if any(a.star for a in call.args):
            return None
        name, position = fact.trained_parameter
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == name:
                return arg.value
        positional = [a for a in call.args if a.keyword is None]
        if 0 <= position < len(positional):
            return positional[position].value
        return None

    def _handed_prepared(self, call: cst.Call, fact: HelperFact) -> bool:
        """Does this file prepare the model it hands a function of a training
        file of this batch that trains it (``train_one_epoch(model, optimizer,
        loader)`` with ``model``'s optimizer built here)?"""
        handed = self._handed_model(call, fact)
        if handed is None:
            return False
        key = root_key(self.index, handed)
        return key is not None and (key in self.optimized or self._is_prepared(key))

    def _block_unprepared_handed(self, call: cst.Call, fact: HelperFact) -> None:
        """``train(model=model, loaders=..., cfg=cfg)`` of a training file of this
        batch that trains the model it is handed, where nothing in this file
        shows that model trained (its optimizer is built over there): this file
        would not prepare it, so it is left whole, and that file with it (AM103)."""
        self.block(
            call,
            f"`{snippet(call)}` hands a model to {fact.where}, which trains it "
            f"there: {fact.trains}; no optimizer built in this file receives its "
            "parameters (one that a function of another module builds over it "
            "is not followed), so accel-migrate cannot show here that it is "
            f"trained and does not prepare it, while {fact.file} counts on its "
            "callers to prepare the models they hand it. Wrap the model with "
            "accel.prepare_model(...) where it is built, and its optimizer with "
            "accel.prepare_optimizer(...) where that is built" + ALL_OR_NOTHING,
        )

    def _block_subclassed_trainers(self) -> None:
        """``class ClsTrainer(BaseTrainer)`` of this file over a base of a local
        module that trains what it is handed (its loop calls the backward:
        ``HelperFact.trains``; the subclass writes ``training_step``), or that
        builds the optimizer while this class's methods run the backward
        (``HelperFact.builds_optimizer``; the subclass writes ``_train_epoch``):
        the model's optimizer, and the loop or the step, are in the base's file.
        accel-migrate prepares a model and its optimizer in one file, so this
        file is left whole (and the base's file is, by AM004 there)."""
        for cls in findall(self.index.module, m.ClassDef()):
            methods = findall(cls.body, m.FunctionDef())  # type: ignore[attr-defined]
            steps = any(self.index.runs_backward(f.body) for f in methods)  # type: ignore[attr-defined]
            for base in cls.bases:  # type: ignore[attr-defined]
                fact = self.index.helper(base.value)
                if (
                    fact is None
                    or fact.kind != "class"
                    or fact.collectives  # the base already runs the runtime's calls
                ):
                    continue
                name = cls.name.value  # type: ignore[attr-defined]
                if fact.trains:
                    how = (
                        f"`{name}` (line {self._line(cls)}) inherits the training "
                        f"of its base {fact.where}: {fact.trains}"
                    )
                elif fact.builds_optimizer and steps:
                    how = (
                        f"`{name}` (line {self._line(cls)}) runs a backward in its "
                        f"methods, and its base {fact.where} sets up the training: "
                        f"{fact.builds_optimizer}"
                    )
                else:
                    continue
                self.block(
                    base,
                    f"{how}. accel-migrate prepares a model and its optimizer in one "
                    "file and does not follow a class into a base of another file, "
                    "so neither this file nor the base's is migrated for it; wrap "
                    "the model with accel.prepare_model(...) before it is handed to "
                    f"`{name}`, its optimizer with accel.prepare_optimizer(...) "
                    "where it is built, the loaders with "
                    "accel.prepare_dataloader(...), the backward with "
                    "accel.backward(...) and the base's saves with accel.save(...)"
                    + ALL_OR_NOTHING,
                )
                break

    def _block_own_trainer(self, call: cst.Call, fact: HelperFact) -> None:
        """``model = Pix2PixModel(opt)`` of a local module whose class builds and
        trains its own networks: nothing of its setup is in this file."""
        self.block(
            call,
            f"`{snippet(call)}` builds {fact.where}, which trains models of its "
            f"own there: {fact.trains_own}. accel-migrate migrates a training "
            "setup one file at a time and does not prepare models across files, so "
            f"{fact.file} is not migrated; in {fact.file} wrap each model it "
            "builds with accel.prepare_model(...) and each optimizer with "
            "accel.prepare_optimizer(...), and its backward with "
            "accel.backward(...); where this file feeds it batches, shard that "
            "loader with accel.prepare_dataloader(...), and make the losses it "
            "hands back global (accel.global_loss) where they are logged. Nothing in this "
            f"file was migrated: while each process trains a full copy in "
            f"{fact.file}, sharding this file's loaders, reducing its metrics or "
            "moving its logs and saves to the main process would mix a migrated "
            "half with an unmigrated one",
        )

    def _optimizer_from_method(self, key: Key) -> cst.Call | None:
        """``optimizer = model.configure_optimizers(config)`` (then
        ``optimizer.step()``): the model's own method hands back its optimizer."""
        stepped = {
            self.index.key(a.value)
            for call in self.index.calls
            if (a := method_call(call, "step")) is not None
        }
        for other, values in self.index.values.items():
            if other not in stepped:
                continue
            for value in values:
                receiver = method_call(value, "configure_optimizers")
                if receiver is not None and self.index.key(
                    receiver.value
                ) in self.index.flows_into({key}):
                    return value  # type: ignore[return-value]
        return None

    @cached_property
    def _model_evidence(self) -> dict[Key, str]:
        """Variables that are models by what the script does with them
        (``model.train()``, ``model.zero_grad()``)."""
        found: dict[Key, str] = {}
        for call in self.index.calls:
            attribute = method_call(call, *MODEL_METHODS)
            if attribute is not None:
                key = self.index.key(attribute.value)
                if key is not None and key not in found:
                    found[key] = snippet(call)
        return found

    @cached_property
    def _stepped_models(self) -> dict[Key, cst.Call]:
        """Models the loop of a backward calls (``out = model(x)``) that this rule
        neither prepares nor sees trained by an optimizer of this file (its
        optimizer is built elsewhere): reached by a backward, and not prepared."""
        found: dict[Key, cst.Call] = {}
        # `while True: batch = next(data_iter)` steps as much as a `for` does
        # (minGPT's Trainer.run); a `while` that reads no loader is not a step.
        loops: list[cst.For | cst.While] = [*self.index.for_loops]
        loops += [
            w
            for w in findall(self.index.module, m.While())
            if self.index.reads_loader(w)  # type: ignore[arg-type]
        ]
        for loop in loops:
            if not self.index.runs_backward(loop.body):
                continue
            for call in findall(loop.body, m.Call()):
                key = self.index.key(call.func)  # type: ignore[attr-defined]
                if (
                    key is None
                    or key in found
                    or key not in self._model_evidence
                    or key in self.optimized
                    or self._is_prepared(key)
                ):
                    continue
                container = self.elements.get(key)
                if container is not None and self._container_state(container) in {
                    "wrap",
                    "prepared",
                }:
                    continue
                found[key] = call  # type: ignore[assignment]
        return found

    def _check_prepared(self, inner: cst.Call, receiver: cst.BaseExpression) -> None:
        """Block the file when the model whose parameters ``inner`` hands an
        optimizer is not, or cannot be shown to be, prepared."""
        container = self._container(receiver)
        if container is not None:
            if self._container_state(container) in {"wrap", "prepared"}:
                return
            place, _ = self._story(container, inner)
            values = [v for v in self.index.values.get(container, []) if v is not None]
            if place is inner and values:
                # `_story` skips a fresh build (`nn.ModuleList([...])`) as a form
                # wrapped elsewhere; here it is the value that cannot be wrapped.
                place = values[0]
            why = (
                f"`{snippet(receiver)}` is an element of `{container[1]}`, which "
                f"gets its value at line {self._line(place)} in a form "
                f"accel-migrate cannot wrap item by item (`{snippet(place)}`); wrap "
                "each model in it with accel.prepare_model(...) where it is built"
            )
        else:
            key = root_key(self.index, receiver)
            if key is not None and self._is_prepared(key):
                return
            if key is None:
                place, why = inner, (
                    f"`{snippet(receiver)}` is trained, but accel-migrate cannot tell "
                    "which model it is; wrap the model with accel.prepare_model(...) "
                    "where it is built"
                )
            else:
                place, why = self._story(key, inner)
        if (place, why) in self._blocked:
            return  # one model handed to several optimizers
        self._blocked.add((place, why))
        self.block(place, why + ALL_OR_NOTHING)

    @cached_property
    def _blocked(self) -> set[tuple[cst.CSTNode, str]]:
        return set()

    def _story(self, key: Key, fallback: cst.CSTNode) -> tuple[cst.CSTNode, str]:
        """Where the trained ``key`` gets its value, and a true sentence on why
        this rule does not wrap it there."""
        name = key[1]
        for value in self.index.values.get(key, []):
            if value is None:
                continue
            place = value
            if self._fresh(key, value):
                continue  # a form wrapped elsewhere; the unwrappable one is the story
            return place, (
                f"`{name}` is built in this file at line {self._line(place)} in a form "
                f"accel-migrate cannot wrap (`{snippet(value)}`); wrap it with "
                "accel.prepare_model(...) there"
            )
        place, why = binding_story(self.index, key, self._line)
        return place or fallback, why
