"""A call, in another file of the batch, of a function of a local module: the
part of the project view (``project_facts``) that ``project_callers`` fills in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .project_namespaces import HandedOption

if TYPE_CHECKING:
    from .project_facts import HelperFact


@dataclass(frozen=True)
class CallSite:
    """A call, in another file of the batch, of a function of this file
    (``project_callers``): where it is, and what kind of value ("model",
    "optimizer", "loader", "loss", "criterion": a loss module; "" where not
    known) each parameter it binds receives there."""

    file: str
    line: int
    arguments: tuple[tuple[str, str], ...] = ()
    #: For a parameter handed a model: the local model class it is an instance
    #: of, where the caller shows one (``project_instances.model_class``).
    classes: tuple[tuple[str, HelperFact], ...] = ()
    #: For a parameter handed a loss module (kind "criterion": ``criterion =
    #: nn.CrossEntropyLoss()`` in the caller): its reduction ("mean", "sum").
    reductions: tuple[tuple[str, str], ...] = ()

    #: For a parameter handed a hand-written batch iterator of the project
    #: (``build_iterator(train_data, config)``): the phrase that names it
    #: (``iterator_factories.handed_iterator``).
    iterators: tuple[tuple[str, str], ...] = ()
    #: For a parameter handed a parsed namespace with rank-local options
    #: (``--local_rank`` defaulting to ``LOCAL_RANK``): those options
    #: (``project_namespaces``).
    namespaces: tuple[tuple[str, tuple[HandedOption, ...]], ...] = ()

    def kind(self, parameter: str) -> str:
        return dict(self.arguments).get(parameter, "")

    def reduction(self, parameter: str) -> str:
        return dict(self.reductions).get(parameter, "")

    def model_class(self, parameter: str) -> HelperFact | None:
        return dict(self.classes).get(parameter)

    def iterator(self, parameter: str) -> str:
        return dict(self.iterators).get(parameter, "")

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"
