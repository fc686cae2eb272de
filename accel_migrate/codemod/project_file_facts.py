"""What one file learns from the project (``ProjectFacts``): the facts of the
helpers it imports from local modules (``project_facts.HelperFact``), in batch
mode the calls the batch's other files make to its functions, and the names
of its local imports; plain frozen data, hashed into the file's cache key
(``digest``).

Static only: built by ``project_view``; nothing is imported, run or written.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from .project_call_sites import CallSite
from .project_facts import HelperFact

__all__ = ["ProjectFacts"]

#: What a caller may hand a function that makes it work on torch objects.
_TORCH_KINDS = frozenset({"model", "optimizer", "loader", "loss", "criterion"})


@dataclass(frozen=True)
class ProjectFacts:
    """The helpers one file imports from local modules, by the qualified name the
    file's code gives them (libcst's: ``utils.get_test_dataloader`` for both
    ``import utils`` and ``from utils import get_test_dataloader``)."""

    helpers: tuple[tuple[str, HelperFact], ...] = ()
    #: The local module files read (for messages and the cache key).
    files: tuple[str, ...] = ()
    #: Every name the file's star imports bind (``from utils import *``), where
    #: each is of a local module whose names could be read; None otherwise.
    star_names: tuple[str, ...] | None = None
    #: In batch mode, the calls the batch's other files make to this file's
    #: top-level functions, by function name, and to its classes' constructors
    #: and methods, as ``Class.__init__`` / ``Class.method`` (``project_callers``).
    callers: tuple[tuple[str, tuple[CallSite, ...]], ...] = ()
    #: In batch mode, for a helper module of the batch migrated for its callers
    #: (``ProjectView.migrated_library``): the batch's files that call it. The
    #: rules that prepare (``Rule.prepares``) do not run on it; its loaders,
    #: models and optimizers are prepared where they are called (AM102).
    library_for: tuple[str, ...] = ()
    #: The top-level names of the file's imports that are local modules (``from
    #: models import Encoder`` with a models.py found), and those of them whose
    #: code may name a device (``device_free``): a file that names no device
    #: and imports nothing else unknown keeps every process on the CPU.
    local_imports: tuple[str, ...] = ()
    device_imports: tuple[str, ...] = ()
    #: The names of the file's local imports that are a library's object, as
    #: libcst names them (``dataloader.DataLoader``; ``<star>.DataLoader`` for a
    #: star import), with the library's name (``project_reexports``).
    reexports: tuple[tuple[str, str], ...] = ()

    def callers_of(self, function: str) -> tuple[CallSite, ...]:
        """The batch's calls of this file's ``function`` from other files."""
        return dict(self.callers).get(function, ())

    def lookup(self, qualnames: Iterable[str]) -> HelperFact | None:
        table = dict(self.helpers)
        for name in qualnames:
            fact = table.get(name)
            if fact is not None:
                return fact
        return None

    def returning(self, qualnames: Iterable[str], kind: str) -> HelperFact | None:
        fact = self.lookup(qualnames)
        return fact if fact is not None and fact.returns == kind else None

    @property
    def library_trainers(self) -> tuple[HelperFact, ...]:
        """The imported classes that train what their caller hands them, or
        models of their own, and the imported functions that train what their
        caller hands them (``train(model=model, loaders=..., cfg=cfg)``), that
        do not call the runtime themselves (``library_trainers``): a script that
        constructs or calls one trains through it, even with no loop of its own."""
        return tuple(
            fact
            for _, fact in self.helpers
            if (
                (fact.kind == "class" and (fact.trains or fact.trains_own))
                or (fact.kind == "function" and (fact.trains or fact.trains_own))
            )
            and not fact.collectives
        )

    @property
    def unfollowed_trainers(self) -> tuple[HelperFact, ...]:
        """The imported classes, not models, that backpropagate and step an
        optimizer held on ``self`` whose model no other fact follows
        (``HelperFact.unfollowed_training``: fast.ai's ``Runner``, reached
        through ``from exp.nb_04 import *``): a script that builds one trains
        through it, so it goes to the full pass, where AM004 leaves it whole."""
        return tuple(
            fact
            for _, fact in self.helpers
            if fact.kind == "class"
            and fact.unfollowed_training
            and not fact.collectives
        )

    @property
    def training_functions(self) -> tuple[HelperFact, ...]:
        """The imported functions, of files this run does not migrate, that run
        a whole training of their own (``HelperFact.runs_training``): a script
        with no loop of its own that calls one (daandouwe/glove's main.py,
        ``train.main(args)``) trains through it, so it goes to the full pass,
        where AM004 names the call."""
        return tuple(
            fact
            for _, fact in self.helpers
            if fact.kind == "function" and fact.runs_training and not fact.collectives
        )

    @property
    def self_training_models(self) -> tuple[HelperFact, ...]:
        """The imported model classes with a method that runs the model's layers
        and backpropagates itself (``HelperFact.training_methods``: lkulowski's
        ``lstm_seq2seq.train_model``, DKT's ``train_model``): a script that
        calls one trains through it with no loop, loader or optimizer of its
        own, so it goes to the full pass, where AM042 names the call."""
        return tuple(
            fact
            for _, fact in self.helpers
            if fact.returns == "model" and fact.training_methods
        )

    @property
    def drives_trainer(self) -> bool:
        """Does the script import a class of this batch's migrated files that
        trains models of its own (``HelperFact.migrated_trainer``)? Then it is
        the entry point of that training, launched on every process: its own
        prints and writes are migrated even with no loop of its own
        (``drivers``)."""
        return any(
            fact.kind == "class" and fact.migrated_trainer and fact.batch_migrated
            for _, fact in self.helpers
        )

    @property
    def builds_local_optimizer(self) -> bool:
        """Does the file import a local module's ``torch.optim.Optimizer``
        subclass? With a backward of its own it trains, even where it calls no
        ``step()`` (SAM's ``first_step``/``second_step``) and no torch
        optimizer class."""
        return any(fact.optimizer_subclass for _, fact in self.helpers)

    @property
    def handed_torch(self) -> bool:
        """Does another file of the batch hand one of this file's functions a
        model, an optimizer, a loader or a loss (``train_one_epoch(model,
        loader, optimizer, criterion)``)? Then the file works on torch objects
        even where it names no torch module (an engine.py whose step only calls
        what it is handed)."""
        return any(
            kind in _TORCH_KINDS
            for _, sites in self.callers
            for site in sites
            for _, kind in site.arguments
        )

    def digest(self) -> str:
        """A hash of every fact: a file's cached result is valid for these facts only."""
        return hashlib.sha256(repr(self).encode()).hexdigest()

    def __bool__(self) -> bool:
        return bool(self.helpers or self.callers or self.library_for)
