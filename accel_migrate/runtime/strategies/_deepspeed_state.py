"""Full state dicts under DeepSpeed ZeRO, assembled from its partitions.

The model's: the fp32 master weights under the original keys (stage 3 gathers
the parameters). The optimizer's: PyTorch's layout (integer ids in the order the
script built its groups), each parameter's state assembled with DeepSpeed's
``safe_get_full_optimizer_state``. Loading takes rank 0's values; a resume before
the first step creates the state the partitions would get at it. Collectives:
every rank calls them.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from typing import Any

import torch
from torch import nn


class DeepSpeedState:
    """The state-dict half of ``DeepSpeedStrategy`` (a mixin: it uses the
    strategy's ``engine``, ``_module``, ``_groups``, ``device`` and ``stage``)."""

    engine: Any
    _module: nn.Module | None
    _groups: list[list[nn.Parameter]]
    device: torch.device

    @property
    def stage(self) -> int:
        raise NotImplementedError

    def _gathered(self, modifier_rank: int | None = None) -> Any:
        if self.stage != 3:
            return nullcontext()
        import deepspeed

        return deepspeed.zero.GatheredParameters(
            list(self._module.parameters()),  # type: ignore[union-attr]
            modifier_rank=modifier_rank,
        )

    def module_state_dict(self, module: nn.Module) -> dict[str, Any]:
        if module is not self._module:
            return module.state_dict()
        from deepspeed.utils import safe_get_full_fp32_param

        with self._gathered():
            state = {
                key: value.detach().clone()
                for key, value in module.state_dict(keep_vars=True).items()
            }
            masters = {
                id(p): safe_get_full_fp32_param(p)
                for p in module.parameters()
                if p.requires_grad
            }
            for key, value in module.state_dict(keep_vars=True).items():
                master = masters.get(id(value))
                if master is not None:
                    state[key] = master.detach().clone().reshape(state[key].shape)
        return state

    def load_module_state_dict(
        self, module: nn.Module, state: Mapping[str, Any], strict: bool = True
    ) -> Any:
        if module is not self._module:
            return module.load_state_dict(state, strict=strict)
        from deepspeed.utils import safe_set_full_fp32_param

        # Every rank loads the same values; under stage 3 rank 0's are kept.
        with self._gathered(modifier_rank=0):
            result = module.load_state_dict(state, strict=strict)
        names = dict(module.named_parameters())
        for name, param in names.items():
            if param.requires_grad and name in state:
                value = state[name].to(self.device, torch.float32)
                _set_full(param, value, None, safe_set_full_fp32_param)
        return result

    def full_parameters(
        self, optimizer: torch.optim.Optimizer
    ) -> list[torch.Tensor] | None:
        if self.engine is None or optimizer is not self._optimizer:
            return None
        from deepspeed.utils import safe_get_full_fp32_param

        values = []
        with self._gathered():
            for params in self._groups:
                for param in params:
                    master = (
                        safe_get_full_fp32_param(param) if param.requires_grad else None
                    )
                    value = param if master is None else master
                    values.append(value.detach().clone().reshape(shape(param)))
        return values

    def _inner(self) -> torch.optim.Optimizer:
        return self.engine.optimizer.optimizer

    def optimizer_state_dict(self) -> dict[str, Any]:
        """The full state in PyTorch's layout, as the script's optimizer had it."""
        from deepspeed.utils import safe_get_full_optimizer_state

        inner = self._inner()
        flat_states = [s for s in inner.state.values() if s]
        if flat_states:
            self._link_optimizer_state()
        tensor_keys = sorted(
            {
                k
                for s in flat_states
                for k, v in s.items()
                if isinstance(v, torch.Tensor) and v.dim() > 0
            }
        )
        scalars = {
            k: v
            for s in flat_states[:1]
            for k, v in s.items()
            if not (isinstance(v, torch.Tensor) and v.dim() > 0)
        }
        state: dict[int, dict[str, Any]] = {}
        groups = []
        index = 0
        for params, group in zip(self._groups, inner.param_groups, strict=True):
            ids = []
            for param in params:
                entry: dict[str, Any] = {}
                if param.requires_grad and flat_states:
                    for key in tensor_keys:
                        full = safe_get_full_optimizer_state(param, key)
                        if full is not None:
                            entry[key] = full.detach().clone().reshape(shape(param))
                    entry.update(
                        {
                            k: v.clone() if isinstance(v, torch.Tensor) else v
                            for k, v in scalars.items()
                        }
                    )
                if entry:
                    state[index] = entry
                ids.append(index)
                index += 1
            groups.append(
                {**{k: v for k, v in group.items() if k != "params"}, "params": ids}
            )
        return {"state": state, "param_groups": groups}

    def load_optimizer_state_dict(self, state: dict[str, Any]) -> None:
        from deepspeed.utils import safe_set_full_optimizer_state

        inner = self._inner()
        saved_groups = state["param_groups"]
        if len(saved_groups) != len(self._groups):
            raise ValueError(
                f"loaded optimizer state has {len(saved_groups)} parameter groups, "
                f"this optimizer {len(self._groups)}"
            )
        by_id = {}
        for params, saved, group in zip(
            self._groups, saved_groups, inner.param_groups, strict=True
        ):
            if len(saved["params"]) != len(params):
                raise ValueError(
                    "loaded optimizer state does not match this optimizer's parameters"
                )
            by_id.update(zip(saved["params"], params, strict=True))
            group.update({k: v for k, v in saved.items() if k != "params"})
        entries = [e for e in state["state"].values() if e]
        if not entries:
            return
        sample = entries[0]
        tensor_keys = [
            k for k, v in sample.items() if isinstance(v, torch.Tensor) and v.dim() > 0
        ]
        scalars = {k: v for k, v in sample.items() if k not in tensor_keys}
        self._create_state(inner, tensor_keys)
        for flat in self._flats(inner):
            for key, value in scalars.items():
                inner.state[flat][key] = (
                    value.clone() if isinstance(value, torch.Tensor) else value
                )
        for saved_id, entry in state["state"].items():
            param = by_id[saved_id]
            for key in tensor_keys:
                value = entry[key].to(self.device, torch.float32)
                _set_full(param, value, key, safe_set_full_optimizer_state)

    def _flats(self, inner: torch.optim.Optimizer) -> list[torch.Tensor]:
        """The partitions the engine steps (stage 3 keeps its own list)."""
        flats = getattr(self.engine.optimizer, "fp32_partitioned_groups_flat", None)
        if flats is None:
            flats = [p for group in inner.param_groups for p in group["params"]]
        return list(flats)

    def _create_state(self, inner: torch.optim.Optimizer, keys: list[str]) -> None:
        """A resume before the first step: the partitions' state does not exist
        yet (torch optimizers create it at their first step)."""
        for flat in self._flats(inner):
            for key in keys:
                if key not in inner.state[flat]:
                    inner.state[flat][key] = torch.zeros_like(flat)
        self._link_optimizer_state()

    def _link_optimizer_state(self) -> None:
        """Stages 1 and 2 map each parameter into its partition's optimizer state
        (``safe_get/set_full_optimizer_state`` read through that map) once, and
        DeepSpeed 0.19.8 does it right after the step of the *first* parameter
        group: it steps group by group, so a second group (nanoGPT's parameters
        without weight decay) was mapped before its state existed, and reading it
        failed with "exp_avg not found in optimizer state fragment". Map every
        group again, now that each has its state (stage 3 has no such map)."""
        zero = self.engine.optimizer
        link = getattr(zero, "_lazy_init_hp_params_optimizer_state", None)
        if link is None:
            return
        zero._hp_optimizer_states_linked = False
        link()


def _set_full(
    param: nn.Parameter, value: torch.Tensor, key: str | None, safe: Any
) -> None:
    """DeepSpeed's ``safe_set_full_*``, but for a stage-3 parameter whose size the
    world does not divide: DeepSpeed 0.19.8 narrows the unpadded value there, past
    its end on the last rank. Its partition is padded, so pad the value."""
    if not hasattr(param, "ds_id"):
        if key is None:
            safe(param, value)
        else:
            safe(param, value, key)
        return
    zero = param._z3_optimizer  # type: ignore[attr-defined]
    if not param.requires_grad:
        return
    part, _ = zero._get_fp32_opt_state_partition(
        param, release_swap_buffers=False, optim_state_key=key
    )
    rank = zero._get_param_partition_rank(param)
    flat = value.reshape(-1)
    padded = torch.zeros(
        part.numel() * (rank + 1), dtype=flat.dtype, device=flat.device
    )
    used = min(flat.numel(), padded.numel())
    padded[:used] = flat[:used]
    part.data.copy_(padded[part.numel() * rank :])


def shape(param: nn.Parameter) -> torch.Size:
    return getattr(param, "ds_shape", param.shape)
