"""AM004's reading of plain holders of models (``plain_holders``): a variable
bound to an instance of a class that is not an nn.Module (pointer_summarizer's
``self.model = Model(path)``, ``class Model(object)``) whose attributes'
parameters feed an optimizer (``list(self.model.encoder.parameters()) +
list(self.model.decoder.parameters())``).

Such a variable is no model to wrap (``accel.prepare_model(Model(path))``
fails: the holder has no parameters of its own nor a forward), and the
modules it holds are built in the holder's ``__init__``, where the training
file cannot prepare them. The setup is left whole (``block``), with one
needs-review finding at the construction naming the holder and its
attributes the optimizer trains.

A mixin of the rule, as ``OptimizedModels`` is: it reads the rule's ``index``,
``_fresh``, ``_core``, ``_line`` and ``block``.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from .all_or_nothing import ALL_OR_NOTHING
from .analysis import Key
from .plain_holders import plain_class
from .trained_models import root_key, snippet


class HolderModels:
    """Variables holding a plain object whose attributes are trained."""

    @cached_property
    def plain_holders(self) -> dict[Key, tuple[cst.BaseExpression, str]]:
        """Each variable whose every fresh value builds a plain class: its first
        such value and the phrase naming the class."""
        found: dict[Key, tuple[cst.BaseExpression, str]] = {}
        for key, values in self.index.values.items():  # type: ignore[attr-defined]
            fresh = [v for v in values if v is not None and self._fresh(key, v)]  # type: ignore[attr-defined]
            phrases = []
            for value in fresh:
                core = self._core(value)  # type: ignore[attr-defined]
                phrase = (
                    plain_class(self.index, core.func)  # type: ignore[attr-defined]
                    if isinstance(core, cst.Call)
                    else None
                )
                phrases.append(phrase)
            if fresh and all(phrases):
                found[key] = (fresh[0], phrases[0])  # type: ignore[assignment]
        return found

    def holder_trained(self, optimizer: cst.Call, inner: cst.Call) -> bool:
        """``inner`` (``self.model.encoder.parameters()``) reads a module held by
        a plain object: block the file once per holder and say so (True)."""
        receiver = inner.func.value  # type: ignore[attr-defined]
        key = root_key(self.index, receiver)  # type: ignore[attr-defined]
        if key is None or key not in self.plain_holders:
            return False
        if key in self._blocked_holders:
            return True
        self._blocked_holders.add(key)
        value, phrase = self.plain_holders[key]
        line = self._line  # type: ignore[attr-defined]
        self.block(  # type: ignore[attr-defined]
            value,
            f"`{key[1]}` is an instance of {phrase}, a plain class (not an "
            f"nn.Module) whose modules are trained: the optimizer at line "
            f"{line(optimizer)} takes `{snippet(receiver)}.parameters()`. "
            "accel.prepare_model(...) cannot wrap the holder (it has no parameters "
            "or forward of its own), and the modules it holds are built in its "
            "own __init__, out of this file's reach; wrap each of them with "
            "accel.prepare_model(...) where the holder builds it (or make the "
            "holder an nn.Module), and the optimizer with "
            "accel.prepare_optimizer(...)" + ALL_OR_NOTHING,
        )
        return True

    @cached_property
    def _blocked_holders(self) -> set[Key]:
        return set()
