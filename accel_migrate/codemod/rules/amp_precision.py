"""AM012 amp-precision: the script's AMP settings become the run's configuration.

## What
Changes no code. Reads the script's AMP before AM013/AM014 rewrite it and says
how the migrated script must be launched to train as the original did:

- the precision: fp16 for a ``GradScaler`` or a float16 autocast (the default of
  ``torch.cuda.amp.autocast`` and of ``torch.autocast("cuda")``), bf16 for
  ``dtype=torch.bfloat16`` (the default of CPU autocast); info, at the first AMP
  call, with ``accel-migrate launch --precision <p>`` and the
  ``[tool.accel-migrate]`` setting.
- the switch: AMP turned on and off by an expression (``enabled=args.amp``);
  info, naming the expression, at the first call that uses it.
- needs-review when the precision cannot be told (``dtype=ptdtype``, a device
  type held in a variable, with CUDA's default float16 and the CPU's bfloat16),
  or when the script mixes fp16 and bf16.

Calls with ``enabled=False`` (a region kept in fp32) are not AMP.

## Why
After migration the script's autocast and GradScaler defer to the runtime
(AM013, AM014): the precision is whatever the run is launched with, fp32 unless
told otherwise. A script that trained in fp16 and is launched without
``--precision fp16`` trains in fp32 (the runtime warns once); one that switches
AMP off with a flag must be launched in fp32 to train as it did with the flag
off: the run's precision wins, so in an fp16 or bf16 run the prepared model's
forward autocasts even where the script turns AMP off (the runtime warns once in
fp16, and goes on).

## Example
```python
# before
scaler = torch.cuda.amp.GradScaler(enabled=args.amp)
with torch.cuda.amp.autocast(enabled=args.amp):
    loss = criterion(model(x), y)
# after
scaler = accel.grad_scaler(enabled=args.amp)
with accel.autocast(enabled=args.amp):
    loss = criterion(model(x), y)
# AM012 [info] the script trains with AMP in fp16 ...: launch with
#   `accel-migrate launch --precision fp16` or set [tool.accel-migrate] precision = "fp16"
# AM012 [info] AMP is switched by `args.amp`: ...
```

## Fix safety
Nothing is rewritten: the findings say what to put on the launch command line or
in ``pyproject.toml``.
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import PositionProvider

from ..amp import (
    AUTOCAST,
    GRAD_SCALER,
    PrecisionName,
    amp_api,
    argument,
    autocast_precisions,
    code,
    is_false,
    is_true,
)
from ..rule import Rule

#: How many AMP calls a finding lists.
_LISTED = 4


class AmpPrecision(Rule):
    code = "AM012"
    name = "amp-precision"
    summary = "report the script's AMP precision and switch: launch with --precision fp16/bf16"
    # Its code sorts it before AM013/AM014: it reads torch's autocast and GradScaler
    # calls before they are rewritten.

    def applies(self) -> bool:
        # Every finding is about an autocast or GradScaler call (`amp_api`).
        return self.originally_calls(AUTOCAST.keys() | GRAD_SCALER.keys())

    def visit_Module(self, node: cst.Module) -> None:
        #: (call, what, precisions or None, the expression deciding the dtype)
        uses: list[tuple[cst.Call, str, set[PrecisionName] | None, str | None]] = []
        switches: dict[str, cst.Call] = {}
        # Only the AMP calls are placed (a stable sort of the few found gives
        # them in the order a sort of every call would): a tree no AMP call is
        # in generates no positions.
        found_calls = [
            (call, found)
            for call in self.index.calls
            if (found := amp_api(self.index, call)) is not None
        ]
        for call, (kind, qualname) in sorted(
            found_calls, key=lambda item: self._place(item[0])
        ):
            if kind == "autocast":
                params = AUTOCAST[qualname][0]
                enabled = argument(call, params, "enabled")
                precisions, decider = autocast_precisions(self.index, call, qualname)
                what = "autocast"
            else:
                enabled = argument(call, GRAD_SCALER[qualname], "enabled")
                precisions, decider, what = {"fp16"}, None, "GradScaler"
            if is_false(enabled):
                continue
            if enabled is not None and not is_true(enabled):
                switches.setdefault(code(enabled), call)
            uses.append((call, what, precisions, decider))
        if not uses:
            return
        precision = self._report_precision(uses)
        when_on = (
            f"--precision {precision}" if precision else "the script's AMP precision"
        )
        for expression, call in switches.items():
            self.report(
                call,
                "info",
                f"AMP is switched by `{expression}`: launch with {when_on} when it is true and --precision fp32 when it is false (the run's precision wins: in an fp16 or bf16 run the prepared model's forward autocasts even where the script turns AMP off, with one warning in fp16)",
            )

    def _place(self, node: cst.CSTNode) -> tuple[int, int]:
        start = self.get_metadata(PositionProvider, node).start
        return start.line, start.column

    def _line(self, node: cst.CSTNode) -> int:
        return self.original_line(node)

    def _report_precision(
        self,
        uses: list[tuple[cst.Call, str, set[PrecisionName] | None, str | None]],
    ) -> PrecisionName | None:
        """Report the precision the script trains in; return it when it is one."""
        undecided = [use for use in uses if use[2] is None]
        if undecided:
            call, what, _, decider = undecided[0]
            by = f"`{decider}`" if decider else "its arguments"
            self.report(
                call,
                "needs-review",
                f"the {what} precision is decided by {by}: launch with `accel-migrate launch --precision fp16` for float16 (CUDA autocast's default), bf16 for bfloat16 (CPU autocast's default), or set [tool.accel-migrate] precision",
            )
            return None
        precisions = set().union(*(use[2] or set() for use in uses))
        described = [
            f"{what}{' ' + '/'.join(sorted(p or ())) if what == 'autocast' else ''} line {self._line(call)}"
            for call, what, p, _ in uses
        ]
        places = ", ".join(described[:_LISTED])
        if len(described) > _LISTED:
            places += f", {len(described) - _LISTED} more"
        if len(precisions) > 1:
            scaler = any(what == "GradScaler" for _, what, _, _ in uses)
            note = (
                " (bf16 needs no loss scaling: the runtime's scaler then does nothing)"
                if scaler
                else ""
            )
            self.report(
                uses[0][0],
                "needs-review",
                f"the script mixes fp16 and bf16 ({places}); a run has one precision: launch with `accel-migrate launch --precision fp16` or bf16{note}",
            )
            return None
        (precision,) = precisions
        self.report(
            uses[0][0],
            "info",
            f'the script trains with AMP in {precision} ({places}): launch with `accel-migrate launch --precision {precision}` or set [tool.accel-migrate] precision = "{precision}"; without it the migrated script trains in fp32',
        )
        return precision
