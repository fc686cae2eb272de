"""AM004's blocking findings (``AllOrNothing``): a trained model the rule cannot
show prepared leaves the whole file unchanged, with the message's common end
(``ALL_OR_NOTHING``)."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .analysis import Key, method_call
from .base_built_models import base_built_story
from .index_syntax import attr_chain
from .names import SAME_OBJECT
from .owned_optimizers import stepped_attribute_owners
from .quantization_swaps import quantization_swap, swap_message
from .shadowed_modules import shadowed_module
from .subtrees import findall
from .trained_models import (
    binding_story,
    placeholder,
    reaching_first,
    root_key,
    snippet,
)
from .trainer_blocks import ALL_OR_NOTHING, TrainerBlocks

if TYPE_CHECKING:
    from .analysis import ModuleIndex
    from .project_facts import HelperFact


#: Methods a script calls on a model it trains (not `.parameters()`: a frozen
#: feature extractor is asked for them to turn requires_grad off).
MODEL_METHODS = ("train", "zero_grad")
#: The one parameter nn.Module's ``train(mode=True)`` and ``zero_grad(
#: set_to_none=True)`` take: a call that passes another keyword, or more than one
#: argument, is a method of something else (davda54/sam's ``log.train(
#: len_dataset=len(dataset.train))`` on its Log), no evidence of a model.
_MODEL_METHOD_PARAMETER = {"train": "mode", "zero_grad": "set_to_none"}


def _module_signature(call: cst.Call, method: str) -> bool:
    """Can ``call``'s arguments bind to nn.Module's ``method``?"""
    if len(call.args) > 1:
        return False
    return all(
        arg.keyword is None or arg.keyword.value == _MODEL_METHOD_PARAMETER[method]
        for arg in call.args
    ) and not any(arg.star for arg in call.args)


class AllOrNothing(TrainerBlocks):
    """AM004's blocking findings: a trained model it cannot show prepared leaves
    the whole file unchanged (``Rule.block``). A mixin of the rule: it reads the
    rule's analysis (``models``, ``optimized``, ``elements``...)."""

    def visit_Module(self, node: cst.Module) -> None:
        self._block_library_trainers()
        self._block_training_functions()
        self._block_method_trainers()
        self._block_unfollowed_trainers()
        self._block_picked_trainers()
        self._block_subclassed_trainers()
        self._block_quantization_swaps()
        self._block_picked_models()
        for key, call in self._stepped_models.items():
            values = [
                v
                for v in self.index.values.get(key, [])
                if v is not None and not placeholder(v)
            ]
            place = (
                reaching_first(self.index, values, call, self._line)[0]  # type: ignore[arg-type]
                if values
                else binding_story(self.index, key, self._line, call)[0]
            )
            place = place or call
            method = self._optimizer_from_method(key)
            if method is not None:
                bound, _ = binding_story(self.index, key, self._line, call)
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
            built = f"(line {self._line(place)})"
            item = values[0] if values else None
            if not (
                isinstance(item, cst.Subscript)
                and all(isinstance(v, cst.Subscript) for v in values)
            ):
                item = None
            elif (container := attr_chain(item.value)) is not None:
                built = f"(before it is put in `{container}`)"
            if isinstance(place, cst.Param):
                function = self.index.enclosing_function(place)
                name = function.name.value if function is not None else "a function"
                built = (
                    f"(here `{key[1]}` is a parameter of `{name}()`, line "
                    f"{self._line(place)}: wrap the model handed to it)"
                )
            self.block(
                place,
                f"`{key[1]}` is a model (`{self._model_evidence[key]}`) called in a "
                f"training loop (line {self._line(call)}), but "
                f"{self._parameters_clause(key[1], item)}, so "
                "accel-migrate cannot tell how it is trained; wrap it with "
                f"accel.prepare_model(...) where it is built {built} and its "
                "optimizer with accel.prepare_optimizer(...)" + ALL_OR_NOTHING,
            )

    def _block_quantization_swaps(self) -> None:
        """``torch.ao.quantization.prepare_qat(model, inplace=True)`` and the
        other swaps of ``quantization_swaps``: left whole, with the reason."""
        for call in self.index.calls:
            name = quantization_swap(self, call)
            if name:
                self.block(call, swap_message(name) + ALL_OR_NOTHING)

    def _block_picked_models(self) -> None:
        """``model = models.__dict__[args.model]()`` (``picked_models``): a
        model whose class is picked by name from a local module is prepared
        only where every candidate is shown plain; no rule reads the forward
        of a class no call names, so otherwise the setup is left whole."""
        from .picked_models import picked_model, unread_reason

        for key in sorted(self.models, key=lambda k: k[1]):
            for value in self.index.values.get(key, []):
                if value is None or not self._fresh(key, value):
                    continue
                for branch in self._branches(value):
                    core = self._core(branch)
                    if not isinstance(core, cst.Call):
                        continue
                    picked = picked_model(self.index, core)
                    if picked is None:
                        continue
                    how, candidates = picked
                    reasons = [r for r in map(unread_reason, candidates) if r]
                    if candidates and not reasons:
                        continue
                    self._block_picked(core, key, how, candidates, reasons)

    def _block_picked(
        self,
        call: cst.Call,
        key: Key,
        how: str,
        candidates: tuple[HelperFact, ...],
        reasons: list[str],
    ) -> None:
        names = ", ".join(f.where for f in candidates[:4])
        if len(candidates) > 4:
            names += f" (and {len(candidates) - 4} more)"
        why = (
            f"of its candidates ({names}), not every one is shown free of what "
            f"accel-migrate checks a named model for ({'; '.join(reasons[:2])})"
            if candidates
            else "accel-migrate finds no model class or factory there to read"
        )
        self.block(
            call,
            f"`{key[1]}` is built by `{snippet(call)}` (line {self._line(call)}), "
            f"a model class picked at run time by name from {how}: {why}. The "
            "checks of a model's forward (random draws, reductions over the "
            "batch, the loss it returns) read the class a call names, so none of "
            "them reads the class picked here, and preparing it would migrate "
            "that forward unchecked. Build the model by its class's name "
            "(`Net(...)`) so that its forward is read, or wrap it with "
            "accel.prepare_model(...) where it is built once each candidate's "
            "forward is checked by hand" + ALL_OR_NOTHING,
        )

    def _parameters_clause(self, name: str, item: cst.Subscript | None) -> str:
        """Where ``name.parameters()`` go, as a true clause: handed to a callable
        this file picks at run time (DeepHash's
        ``config["optimizer"]["type"](net.parameters(), ...)``: a subscript of a
        value, not a class this rule can name), or to no optimizer built here.
        Where every binding of ``name`` takes it out of a container (``item``:
        Knowledge-Distillation-Zoo's ``snet = nets["snet"]``), the model may be
        another variable's, whose optimizer this rule does not follow: said so,
        not that none is built."""
        for call in self.index.calls:
            if (
                # `table[key](...)`, `factory(...)(...)`: no name to resolve
                isinstance(call.func, (cst.Subscript, cst.Call))
                and not self.is_optimizer_call(call)
                and self.index.helper(call.func) is None
                and any(_parameters_of(a.value, name) for a in call.args)
            ):
                return (
                    f"its parameters are handed to `{snippet(call)}` (line "
                    f"{self._line(call)}), a call of `{snippet(call.func)}`, a value "
                    "the script picks at run time that accel-migrate cannot show to "
                    "be an optimizer class"
                )
        if item is not None:
            return (
                f"it is taken out of a container (`{snippet(item)}`, line "
                f"{self._line(item)}), which accel-migrate does not follow to the "
                "model put in it"
            )
        through = self._optimizer_through_call(name)
        if through is not None:
            return (
                f"its parameters reach an optimizer only through "
                f"`{snippet(through)}` (line {self._line(through)}), a call whose "
                "result is handed to the optimizer and which accel-migrate does not "
                "read for the parameters it returns"
            )
        return (
            "its parameters reach no optimizer built in this file"
            + self._handed_parameters(name)
        )

    def _optimizer_through_call(self, name: str) -> cst.Call | None:
        """A call taking the model ``name`` itself whose result the file hands
        to an optimizer it builds (face.evoLVe's ``backbone_paras_only_bn,
        backbone_paras_wo_bn = separate_irse_bn_paras(BACKBONE)``, then
        ``optim.SGD([{'params': backbone_paras_wo_bn + ...}, ...])``): the
        parameters may reach that optimizer, through a function this rule does
        not read; None where there is no such call."""
        handed: set[Key] = set()
        for call in self.index.calls:
            if self.is_optimizer_call(call):
                for arg in call.args:
                    for node in findall(arg.value, m.Name()):
                        key = self.index.key(node)
                        if key is not None:
                            handed.add(key)
        flows = self.index.flows_into(handed)
        for call in self.index.calls:
            if self.is_optimizer_call(call) or not any(
                m.matches(a.value, m.Name(name)) for a in call.args
            ):
                continue
            assign = next(
                (a for a in self.index.ancestors(call) if isinstance(a, cst.Assign)),
                None,
            )
            if assign is None:
                continue
            for target in assign.targets:
                names = findall(target.target, m.Name())
                if isinstance(target.target, cst.Name):
                    names = [target.target, *names]
                for node in names:
                    if self.index.key(node) in flows:
                        return call
        return None

    def _handed_parameters(self, name: str) -> str:
        """Where the file hands ``name.parameters()`` to a class or function of
        another local module (LSTNet's ``Optim.Optim(model.parameters(), ...)``,
        whose ``_makeOptimizer`` builds the torch optimizer), as a clause; ""
        when it does not."""
        for call in self.index.calls:
            fact = self.index.helper(call.func)
            if fact is None:
                continue
            for arg in call.args:
                if _parameters_of(arg.value, name):
                    return (
                        f" (`{snippet(call)}`, line {self._line(call)}, hands them "
                        f"to {fact.where}, which builds what steps them in another "
                        "file: accel-migrate does not prepare an optimizer across "
                        "files)"
                    )
        return ""

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
            if attribute is not None and _module_signature(call, attribute.attr.value):
                key = self.index.key(attribute.value)
                if key is not None and key not in found:
                    found[key] = snippet(call)
        for key, evidence in stepped_attribute_owners(self.index).items():
            found.setdefault(key, evidence)
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

    def _story(
        self, key: Key, fallback: cst.CSTNode, depth: int = 0
    ) -> tuple[cst.CSTNode, str]:
        """Where the trained ``key`` gets its value, and a true sentence on why
        this rule does not wrap it there. An alias (``model_without_ddp =
        model``, the reference scripts') tells the story of the name it copies."""
        name = key[1]
        values = [v for v in self.index.values.get(key, []) if v is not None]
        if (
            depth < 3
            and len(values) == 1
            and isinstance(values[0], cst.Name)
            # `model = None` is a placeholder (reaching_first skips it), no alias
            and values[0].value not in ("None", "True", "False")
        ):
            copied = self.index.key(values[0])
            if copied is not None and copied != key:
                place, why = self._story(copied, fallback, depth + 1)
                return place, (
                    f"`{name}` is `{values[0].value}` (line "
                    f"{self._line(values[0])}), and {why}"
                )
        for value in reaching_first(self.index, values, fallback, self._line):  # type: ignore[arg-type]
            if (
                value is None
                or m.matches(value, m.Name("None"))
                or _moved_self(self.index, key, value)
            ):
                # `criterion = None`, a placeholder, and `criterion =
                # criterion.cuda()`, the same object: nothing built there
                continue
            place = value
            if self._fresh(key, value):
                continue  # a form wrapped elsewhere; the unwrappable one is the story
            shadowed = shadowed_module(self, key, value, self._line)
            if shadowed:
                # `model = model.RNNModel(...)` with `global model` above it
                return place, (
                    f"`{name}` is built in this file at line {self._line(place)} "
                    f"from `{snippet(value)}`: {shadowed}"
                )
            return place, (
                f"`{name}` is built in this file at line {self._line(place)} in a form "
                f"accel-migrate cannot wrap (`{snippet(value)}`); wrap it with "
                "accel.prepare_model(...) there"
            )
        place, why = binding_story(self.index, key, self._line, fallback)
        if place is None:
            # `self.model` that a base class's constructor builds (Exp_Basic)
            why = base_built_story(self.index, name, fallback, self._line) or why
        return place or fallback, why


def _parameters_of(value: cst.BaseExpression, name: str) -> bool:
    """Is ``value`` ``name.parameters()``?"""
    return (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value == "parameters"
        and isinstance(value.func.value, cst.Name)
        and value.func.value.value == name
    )


def _moved_self(index: ModuleIndex, key: Key, value: cst.BaseExpression) -> bool:
    """``x.cuda()``, ``x.to(device)`` of ``key`` itself: the same object."""
    return (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in SAME_OBJECT
        and index.key(value.func.value) == key
    )
