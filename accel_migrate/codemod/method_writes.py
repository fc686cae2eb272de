"""Which methods of a class write no file (``HelperFact.quiet_methods``).

A class of a training file of the batch that writes files (a checkpoint in
``save``) has its writes made main-process ones there; a caller in another
file follows each call of its methods with ``accel.barrier()``
(``instance_writes``), so that no process reads a file before the main process
has written it. A method that writes nothing needs no barrier: sfujim/TD3's
``policy.select_action(state)`` runs in every evaluation step and
``policy.train(buffer, batch_size)`` in every environment step, while only
``policy.save(path)`` writes. A method is quiet when its own statements write
no file (``project_effects._Effects``) and every method of the object it calls
(``self.other(...)``) is a quiet method of the same class; a method it
inherits is not known here, so a method that calls one is not quiet. A call of
an attribute the class sets (``self.actor(state)``, a model) is counted as the
class's own ``writes`` count it: not as a write.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .project_helpers import HelperFacts


def quiet_methods(facts: HelperFacts, cls: ast.ClassDef) -> tuple[str, ...]:
    """The methods ``cls`` defines that write no file, directly or through the
    other methods of ``self`` they call (sorted)."""
    from .project_draws import class_methods, self_calls
    from .project_effects import _Effects

    methods = class_methods(cls)
    quiet: set[str] = set()
    calls: dict[str, set[str]] = {}
    for name, method in methods.items():
        effects = _Effects(facts, in_class=True)
        effects.body(method.body)
        if effects.writes:
            continue
        quiet.add(name)
        calls[name] = set(self_calls(method))
    # `self.actor(state)`: an attribute the class sets holds an object (a
    # model), not a method; its calls are counted as the class's are
    # (``_Effects``), so they do not make a method write
    attributes = {
        target.attr
        for node in ast.walk(cls)
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    } - set(methods)
    calls = {name: called - attributes for name, called in calls.items()}
    changed = True
    while changed:  # a method calling a writing (or unknown) method writes
        changed = False
        for name in sorted(quiet):
            if not calls[name] <= quiet:
                quiet.discard(name)
                changed = True
    return tuple(sorted(quiet))
