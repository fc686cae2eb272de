"""Environment steps: ``obs, reward, done, info = env.step(action)``.

Reinforcement-learning scripts step their environments in every rollout
(gym's ``next_state, reward, done, _ = env.step(action)``; jcwleo's
curiosity-driven-exploration ``s, r, d, rd, lr = work.step(action)`` over its
workers; Kaixhin/Rainbow's ``state, reward, done = env.step(action)``). By its
name alone such a call reads as an optimizer's, a scheduler's or a grad
scaler's ``step``, that is, as a training step, and the divergence analysis
then takes a loop over the environments (``for work, action in zip(works,
actions)``) for a loop that trains. No optimizer, scheduler or scaler step
returns a tuple to unpack into three or more names (``optimizer.step(closure)``
returns the closure's loss, the others ``None``), while an environment's step
returns the observation, the reward and the done flag at least: a ``step``
whose result is unpacked so is an environment's, and trains nothing.
"""

from __future__ import annotations

import libcst as cst

#: The fewest names an environment step's result is unpacked into.
_ENVIRONMENT_FIELDS = 3


def environment_step(node: cst.Assign) -> cst.Call | None:
    """The ``x.step(...)`` call of ``node`` when its result is unpacked into
    three or more names (``s, r, done, info = env.step(a)``): an environment's
    step, not an optimizer's."""
    value = node.value
    if not (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value == "step"
        and len(node.targets) == 1
    ):
        return None
    target = node.targets[0].target
    if isinstance(target, (cst.Tuple, cst.List)) and not any(
        isinstance(e, cst.StarredElement) for e in target.elements
    ):
        return value if len(target.elements) >= _ENVIRONMENT_FIELDS else None
    return None
