"""AM046 process-group-queries: a value asked of torch.distributed's process group, which the original run does not have.

## What
Reports, as needs-review, a call in a migrated file that asks torch.distributed
about the process group, ``torch.distributed.get_world_size()`` or
``get_rank()``, or a function of this file or of a local module that does
(facebookresearch/deit's ``utils.get_world_size()`` and ``utils.get_rank()``,
which answer 1 and 0 where no process group is initialised), where the
answer is computed with: ``args.lr * args.batch_size * utils.get_world_size()
/ 512.0``, ``seed = args.seed + utils.get_rank()``, ``torch.manual_seed(
utils.get_rank())``. A world size is reported wherever it is read; a rank only
in arithmetic or a seed: compared with a number (``get_rank() == 0``,
``is_main_process()`` guarding a write) it keeps the meaning it had.

## Why
The original runs as one process with no process group, so such helpers give
1 and 0. The migrated script runs under ``accel-migrate launch``, whose runtime
initialises the process group: they give N and each process's rank. A
learning rate scaled by the world size is then N times the original's, though
the runtime keeps the original's global batch (the batch the scaling was
written for is not there), and a seed offset by the rank makes each process
draw other numbers than the original did. The losses differ from the first
step, with no error.

## Example
```python
# before
linear_scaled_lr = args.lr * args.batch_size * utils.get_world_size() / 512.0
# after
# (unchanged: reported as needs-review)
```

## Fix safety
Report only. Where the value should be the original's, use it
(``linear_scaled_lr = args.lr * args.batch_size / 512.0``: the global batch is
``args.batch_size``); where a per-process batch is meant, launch with
``--batch-mode per-device``, whose global batch is N times larger, and keep
the scaling.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from ..rule import Rule
from ..subtrees import findall
from ..trained_models import snippet

_QUERIES = {
    "torch.distributed.get_world_size": "get_world_size",
    "torch.distributed.get_rank": "get_rank",
}
_SEEDS = frozenset(
    {"torch.manual_seed", "torch.cuda.manual_seed", "numpy.random.seed", "random.seed"}
)
_WHAT = {"get_world_size": "world size", "get_rank": "rank"}
_ORIGINAL = {"get_world_size": "1", "get_rank": "0"}
_MIGRATED = {"get_world_size": "N", "get_rank": "each process's rank"}


class ProcessGroupQueries(Rule):
    code = "AM046"
    name = "process-group-queries"
    summary = (
        "a value computed from torch.distributed's world size or rank -> "
        "reported (1 and 0 in the original run, N and the rank once migrated)"
    )

    def visit_Call(self, node: cst.Call) -> None:
        found = self._queries(node)
        if not found:
            return
        query = "get_world_size" if "get_world_size" in found[0] else "get_rank"
        if query == "get_rank" and not self._computed_with(node):
            return
        self.report(
            node,
            "needs-review",
            f"`{snippet(node)}` asks torch.distributed for the process group's "
            f"{_WHAT[query]} ({found[1]}): the original runs with no process "
            f"group, where it is {_ORIGINAL[query]}; once migrated the runtime "
            f"starts one, and it is {_MIGRATED[query]}, so what is computed from "
            "it changes (a learning rate scaled by the world size, though the "
            "runtime keeps the original's global batch; a seed offset by the rank) "
            "and the losses will not match the original's; use the original's "
            "value here, or launch with --batch-mode per-device where a "
            "per-process batch is meant",
            if_migrated=True,
        )

    def _queries(self, call: cst.Call) -> tuple[tuple[str, ...], str] | None:
        """What ``call`` asks the process group, and where."""
        direct = [q for n, q in _QUERIES.items() if n in self.qualnames(call.func)]
        if direct:
            if self.index.enclosing_function(call) is not None:
                # reported where its function is called: in this file (below),
                # or in another (``HelperFact.group_queries``)
                return None
            return tuple(direct), "torch.distributed"
        fact = self.index.helper(call.func)
        if fact is not None and fact.group_queries:
            return fact.group_queries, f"in {fact.file}: `{fact.name}`"
        target = self.index.callee(call)
        if target is not None:
            inner = {
                q
                for c in findall(target[0], m.Call())
                for n, q in _QUERIES.items()
                if n in self.qualnames(c.func)  # type: ignore[attr-defined]
            }
            if inner:
                return tuple(sorted(inner)), f"`{target[0].name.value}` of this file"
        return None

    def _computed_with(self, call: cst.Call) -> bool:
        """Is the rank an operand of arithmetic, or a seed?"""
        parent = self.parent(call)
        if isinstance(parent, cst.BinaryOperation):
            return True
        if isinstance(parent, cst.Arg):
            outer = self.parent(parent)
            return isinstance(outer, cst.Call) and bool(
                self.qualnames(outer.func) & _SEEDS
            )
        return False
