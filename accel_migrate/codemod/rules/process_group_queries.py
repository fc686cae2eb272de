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

A read in a module-level statement above every statement that starts the
runtime's process group (its first call other than ``accel.rank()``,
``accel.world_size()``, ``accel.is_main_process()`` or ``accel.print``, in the
statement's text or a local function it calls; in a script with no device
code, ``accel.device(accelerator=False)`` right after the imports) still gives
1 and 0 in the migrated run: it is reported as info, saying so, not as a
value that changes (``group_start``).

A rank held in a variable and then seeded with (``rank = get_rank()``, ``rank =
dist.get_rank() if dist.is_initialized() else 0`` or ``rank =
int(os.environ.get("RANK", 0))``, then ``torch.manual_seed(seed + 1 + rank)``)
leaves the file unchanged, with a finding at the seed that names the variable
and the line that sets it: the variable is followed through its definitions
(``rank_local_sources``), where the check above sees only the query's own
parent. A launcher's rank variable counts here too: run as one process it is
unset and its default is seeded with.

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
Report only (a rank seeded through a variable leaves the file unchanged). Where the value should be the original's, use it
(``linear_scaled_lr = args.lr * args.batch_size / 512.0``: the global batch is
``args.batch_size``); where a per-process batch is meant, launch with
``--batch-mode per-device``, whose global batch is N times larger, and keep
the scaling.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from ..group_start import started_before
from ..rank_local_calls import rank_query
from ..rule import Rule
from ..subtrees import findall
from ..trained_models import snippet

_QUERIES = {
    "torch.distributed.get_world_size": "get_world_size",
    "torch.distributed.get_rank": "get_rank",
}
_SEEDS = frozenset(
    {
        "torch.manual_seed",
        "torch.random.manual_seed",
        "torch.cuda.manual_seed",
        "torch.cuda.manual_seed_all",
        "numpy.random.seed",
        "numpy.random.default_rng",
        "numpy.random.RandomState",
        "numpy.random.Generator",
        "random.seed",
        "random.Random",
    }
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
        if node.args and (
            self.qualnames(node.func) & _SEEDS
            # a generator's own seed: `g = torch.Generator(); g.manual_seed(s)`
            or (
                isinstance(node.func, cst.Attribute)
                and node.func.attr.value == "manual_seed"
            )
        ):
            self._seeded_with_held_rank(node)
        found = self._queries(node)
        if not found:
            return
        query = "get_world_size" if "get_world_size" in found[0] else "get_rank"
        if query == "get_rank" and not self._computed_with(node):
            return
        if started_before(self, node) is None:
            self._before_group(node, query, found[1])
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

    def _before_group(self, node: cst.Call, query: str, where: str) -> None:
        """A module-level read above every statement that starts the runtime's
        process group (``group_start``): it still answers the original's value
        there, and only moving it below would change it."""
        self.report(
            node,
            "info",
            f"`{snippet(node)}` asks torch.distributed for the process group's "
            f"{_WHAT[query]} ({where}): here it is still {_ORIGINAL[query]}, as in "
            "the original run (where nothing checks that a group exists, it "
            "fails as the original did), because the runtime starts the process "
            "group at its first call, which comes after this line; read below "
            f"that call it would be {_MIGRATED[query]} and what is computed from "
            "it would change, so keep it above, or use the original's value",
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

    def _seeded_with_held_rank(self, seed: cst.Call) -> None:
        """``rank = get_rank()`` (or ``int(os.environ.get("RANK", 0))``), then
        ``torch.manual_seed(seed + rank)``: the rank reaches the seed through a
        variable, where the check on the query's own parent does not see it."""
        value = seed.args[0].value
        held = self._held_rank(value)
        if held is None:
            return
        variable, source, original = held
        self.block(
            seed,
            f"`{snippet(seed)}` seeds with `{variable}`, which is computed from {source}: "
            f"in the original run it is {original}; once migrated each process "
            "has its own rank, so each process draws other numbers than the "
            "original did and the losses differ from the first step; the file is "
            "left unchanged: seed with the original's value (without the rank), "
            "or keep the per-process seed knowing the run will not match the "
            "original's",
        )

    def _held_rank(self, value: cst.BaseExpression) -> tuple[str, str, str] | None:
        """The variable in ``value`` that holds a rank, what sets it, and what
        it is in the original run; None when no variable does."""
        sources = self.index.rank_local_sources
        for source in sources.of(value).sources:
            # (a `dist.get_rank()` source: the query itself, followed below)
            if (
                source.kind == "environment"
                and source.through
                and not rank_query(self.index, source.node)
            ):
                return (
                    source.through[0],
                    f"`{snippet(source.node)}`, a variable the launcher sets to "
                    "each process's rank",
                    "unset, and the default is used",
                )
        queue = [(n, n.value) for n in findall(value, m.Name())]  # type: ignore[attr-defined]
        seen: set[cst.CSTNode] = set()
        while queue and len(seen) < 50:
            name, first = queue.pop(0)
            for held in sources.reaching_values(name):
                if held in seen:
                    continue
                seen.add(held)
                for call in [held, *findall(held, m.Call())]:
                    if (
                        isinstance(call, cst.Call)
                        and self._asks_rank(call)
                        # `seed = args.seed + get_rank()`: reported there
                        and not self._computed_with(call)
                    ):
                        line = self.context.original_start(self.wrapper, call)[0]
                        return (
                            first,
                            f"`{snippet(call)}` (line {line}), torch.distributed's "
                            "rank",
                            "0 (no process group)",
                        )
                queue.extend(
                    (n, first) for n in findall(held, m.Name())  # type: ignore[misc]
                )
        return None

    def _asks_rank(self, call: cst.Call) -> bool:
        """Does ``call`` ask torch.distributed for the rank (itself, or a
        function that does)?"""
        if "torch.distributed.get_rank" in self.qualnames(call.func):
            return True
        found = self._queries(call)
        return found is not None and "get_rank" in found[0]

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
