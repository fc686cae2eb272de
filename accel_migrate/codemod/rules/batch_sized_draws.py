"""AM034 batch-sized-draws: a random draw of one row per sample becomes the global batch's.

## What
Rewrites a random draw whose first dimension is the batch's sample count, made
where the batches of a data loader are used (a training step, an evaluation
loop, a function they call, a model's ``forward``):
``torch.randn(x.size(0), nz)``, ``torch.rand((len(x), 1))``,
``torch.randint(0, k, (x.shape[0],))``, ``torch.normal(0, 1, size=(b, d))``
with ``b = x.size(0)``, ``numpy.random.normal(0, 1, (x.shape[0], d))``, a draw whose size is a
batch value's whole shape (``torch.randint(high=2, size=heads.size())``,
``torch.rand(x.shape)``: drawn as ``(rows, *x.shape[1:])``), and a
``torch.randn_like(t)`` / ``rand_like`` / ``randint_like`` of a tensor computed
from the batch (a VAE's ``reparameterize``, called from ``forward`` on the
batch). The draw becomes ``accel.batch_draw(count, lambda rows: <the draw of
rows>)``, or ``accel.batch_draw_like(torch.randn_like, t, ...)``. Which draws
are so shaped is the shared analysis of ``codemod/batch_rows.py``.

## Why
The original draws a step's numbers for the whole batch from one random state:
sample *i* gets row *i*. After sharding, each process draws only its share's
rows, from the start of the stream: its samples get other numbers than the
original gave them, and its random state then runs apart from the original's,
so the loss curve cannot match step for step (AM020's finding). The runtime
draws the whole global batch's rows, as the original did, and keeps this
process's rows: every sample gets its original numbers, and every process's
random state stays the original's.

## Example
```python
# before
for real, _ in loader:
    noise = torch.randn(real.size(0), nz, device=device)
# after
for real, _ in accel.prepare_dataloader(loader):
    noise = accel.batch_draw(real.size(0), lambda rows: torch.randn(rows, nz, device=device))
```

## Fix safety
Exact where the processes' random states agree with the original's, which the
runtime keeps so (every process replays the same sampler draw), and the other
draws of the step are the same on every process. Dropout and other draws
inside ``torch.nn`` layers are not rows of the batch and still differ (AM027).
The count must be read off a batch (``x.size(0)``, ``x.shape[0]``,
``len(x)``), or be a parameter every call of which passes one (DDPM's
``sample_timesteps(self, n)`` drawing ``torch.randint(1, T, size=(n,))``,
called as ``self.sample_timesteps(images.shape[0])``); at run time it is checked against this process's share of the
current batch, and where they differ (a batch of another loader) the draw is
made as written, with a warning. With ``--batch-mode per-device`` (no global
batch) and on one process the draw is the original one.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from ..batch_rows import WHOLE_SHAPE, RowsDraw, rows_draw, shape_of
from ..rule import Rule
from ..subtrees import findall


class BatchSizedDraws(Rule):
    code = "AM034"
    name = "batch-sized-draws"
    summary = (
        "torch.randn(x.size(0), ...) in a step -> accel.batch_draw(...) "
        "(the global batch's draw, this process's rows)"
    )
    #: After AM020, which leaves these draws to this rule.
    phase = 55

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        draw = rows_draw(self.index, original_node)
        if draw is None:
            return updated_node
        if draw.rows_at is None:
            return self._like(original_node, updated_node, draw)
        return self._sized(original_node, updated_node, draw)

    def _like(
        self, original: cst.Call, updated: cst.Call, draw: RowsDraw
    ) -> cst.BaseExpression:
        func = (
            updated.func.with_changes(lpar=(), rpar=())
            if updated.func.lpar
            else updated.func
        )
        result = self.runtime_call(
            "batch_draw_like", [cst.Arg(value=func), *updated.args]
        ).with_changes(lpar=updated.lpar, rpar=updated.rpar)
        self.report(
            original,
            "fixed",
            f"{draw.name.split('.')[-1]}(...) -> accel.batch_draw_like(...) "
            "(drawn for the global batch; this process's rows)",
        )
        return result

    def _sized(
        self, original: cst.Call, updated: cst.Call, draw: RowsDraw
    ) -> cst.BaseExpression:
        assert draw.rows_at is not None
        arg_index, element = draw.rows_at
        used = {n.value for n in findall(original, m.Name())}  # type: ignore[attr-defined]
        param = "rows"
        while param in used:
            param += "_"
        args = list(updated.args)
        value = args[arg_index].value
        if element == WHOLE_SHAPE:
            # `size=x.size()`: x's rows, then the rest of its shape
            shaped = shape_of(value)
            assert shaped is not None
            count = cst.Call(
                func=cst.Attribute(value=shaped, attr=cst.Name("size")),
                args=[cst.Arg(value=cst.Integer("0"))],
            )
            source = cst.Module([]).code_for_node(shaped)
            whole = cst.parse_expression(f"({param}, *{source}.shape[1:])")
            args[arg_index] = args[arg_index].with_changes(value=whole)
        elif element is None:
            count = value
            args[arg_index] = args[arg_index].with_changes(value=cst.Name(param))
        else:
            assert isinstance(value, (cst.Tuple, cst.List))
            first = value.elements[0]
            count = first.value
            elements = [first.with_changes(value=cst.Name(param)), *value.elements[1:]]
            args[arg_index] = args[arg_index].with_changes(
                value=value.with_changes(elements=elements)
            )
        inner = updated.with_changes(args=args, lpar=(), rpar=())
        lambda_ = cst.Lambda(
            params=cst.Parameters(params=[cst.Param(name=cst.Name(param))]),
            body=inner,
        )
        if count.lpar:
            count = count.with_changes(lpar=(), rpar=())
        result = self.runtime_call(
            "batch_draw", [cst.Arg(value=count), cst.Arg(value=lambda_)]
        ).with_changes(lpar=updated.lpar, rpar=updated.rpar)
        self.report(
            original,
            "fixed",
            f"{draw.name.split('.')[-1]}(...) of the batch's rows -> "
            "accel.batch_draw(...) (drawn for the global batch; this process's rows)",
        )
        return result
