"""AM042 unimplemented-forward: a trained model whose forward is not implemented stops the migration.

## What
Reports, as needs-review, and leaves the file unchanged: a model built from a
class whose own ``forward`` raises ``NotImplementedError`` (ikostrikov's PPO
``Policy``, run through ``act``, ``get_value`` and ``evaluate_actions``), where
the file builds it: a class of the file, or of another module of the project
(``from a2c_ppo_acktr.model import Policy``, also through a function that
returns one).

It also blocks a training step that backpropagates what a method of a
prepared model other than ``forward`` returns, where that method runs the
model's layers itself (the BiLSTM-CRF's ``loss = model.loss(xs, tags)``, whose
``loss`` builds its features with ``self.embedding`` and ``self.rnn``;
``method_steps``): the model is never called either. The loss is followed
back through unpackings, subscripts, sums, negations and tensor-method
scalings (LightGCN-PyTorch's ``loss, reg_loss = self.model.bpr_loss(users,
pos, neg)``, then ``loss = loss + reg_loss``; pytorch-flows' ``loss =
-model.log_probs(data).mean()``; beta-tcvae's ``obj, elbo = vae.elbo(x, n)``
then ``obj.mean().mul(-1).backward()``). A method that only
combines what ``model(x)`` returned (``model.loss_function(*results)``) is not
one. A call of a model's method that runs its layers and backpropagates itself,
the whole training loop inside the model class (knowledge-tracing-collection-
pytorch's ``model.train_model(train_loader, test_loader, num_epochs, opt,
ckpt_path)``, whose ``DKT.train_model`` calls ``self(q, r)`` and
``loss.backward()``; ``training_calls``), is blocked the same way.

## Why
A prepared model exchanges gradients through its own call: DDP and FSDP run
their hooks in ``forward``. A model that is only ever run through its other
methods never goes through them, so each process would keep the gradients of
its own share; the runtime stops such a run at its first step ("a prepared
model received gradients but was never called"). Migrating code that cannot
run is no help: the finding says so before anything runs.

## Example
```python
# before
class Policy(nn.Module):
    def forward(self, inputs, masks):
        raise NotImplementedError

    def evaluate_actions(self, inputs, masks, action):
        ...

actor_critic = Policy(obs_shape, num_actions)
# after
# (unchanged) AM042 [needs-review] `Policy.forward` raises NotImplementedError,
# and the class is run through `act`, `evaluate_actions` ... the file is left
# unchanged
```

## Fix safety
This rule never rewrites: ``accel.unwrap(model).loss(...)`` runs the same
method past the hooks, and the wrapper's call runs only ``forward``. Route the training computation through ``forward``
(``def forward(self, inputs, masks, action): return
self.evaluate_actions(inputs, masks, action)``, then ``actor_critic(obs, masks,
actions)`` in the update) and migrate again. A class that only declares an
abstract ``forward`` for its subclasses is not reported: only the class that is
built counts. For a loss method, make ``forward`` return the loss when it
is given the targets (``def forward(self, xs, tags=None)``) and call
``model(xs, tags)`` in the step. For a model that trains itself, move the loop
into a function that calls ``model(...)`` on the model it is handed.
"""

from __future__ import annotations

import libcst as cst

from ..imported_draws import instance_facts
from ..index_syntax import ast_class
from ..method_steps import method_steps, training_calls
from ..model_methods import instance_classes
from ..rule import Rule
from ..trained_models import snippet
from ..unimplemented_forward import unimplemented_forward


class UnimplementedForward(Rule):
    code = "AM042"
    name = "unimplemented-forward"
    summary = (
        "a model built from a class whose forward raises NotImplementedError -> "
        "file left unchanged (a prepared model syncs through its own call)"
    )

    def visit_Call(self, node: cst.Call) -> None:
        why = self._local(node) or self._imported(node)
        if not why:
            return
        self.block(
            node,
            f"{why}: a prepared model exchanges gradients through its own call "
            "(DDP and FSDP run their hooks in `forward`), so a model run only "
            "through its other methods would keep each process's own gradients "
            "(the runtime stops it at the first step); the file is left "
            "unchanged: route the training computation through `forward` "
            "(for example a `forward` that returns `self.evaluate_actions(...)`, "
            "called as `model(...)` in the update) and migrate again",
        )

    def visit_Module(self, node: cst.Module) -> None:
        for step in method_steps(self.index):
            if self._built_here_without_forward(step.call):
                continue  # (visit_Call names the class and this method already)
            own = step.own_forward
            if own is None:
                through = f" (`{step.runs}`)" if step.runs else ""
                how = (
                    f"`{step.method}` of {step.where} runs the model's layers "
                    f"inside the method{through}, past the "
                    "prepared (DDP-wrapped) model's call"
                )
                instead = ""
            else:
                how = (
                    f"`{step.method}` of {step.where} runs the model through "
                    f"`{snippet(own)}` (line {self.original_line(own)}): `self` "
                    "there is the module inside the prepared (DDP-wrapped) model, "
                    "so that call skips the prepared model's own call"
                )
                instead = (
                    "call the prepared model in the step where the method calls "
                    f"`{snippet(own)}` (`model(...)`) and compute the loss from its "
                    "output there, or "
                )
            self.block(
                step.call,
                f"the step backpropagates `{snippet(step.call)}`, and {how}: a "
                "prepared model exchanges gradients through its own call (DDP and "
                "FSDP run their hooks in `forward`), so the processes' gradients "
                "are not averaged and each keeps its own share's (the runtime "
                "stops it at the first step), and "
                f"accel.unwrap(model).{step.method}(...) would bypass them the "
                f"same way; the file is left unchanged: {instead}compute the loss "
                "in `forward` when it is given the targets (`def forward(self, x, "
                "y=None)`) and call `model(x, y)` in the step, and migrate again",
            )

        for step in training_calls(self.index):
            through = f" (`{step.runs}`)" if step.runs else ""
            self.block(
                step.call,
                f"`{snippet(step.call)}` trains the model through its own "
                f"method: `{step.method}` of {step.where} runs the model's layers "
                f"itself{through} and backpropagates, past the model's call: a "
                "prepared model exchanges gradients through its own call (DDP and "
                "FSDP run their hooks in `forward`), so each process would keep "
                "its own share's gradients (the runtime stops it at the first "
                "step); the file is left unchanged: move the training loop out of "
                "the model class (a function of the script or of a module that "
                "calls `model(...)` on the model it is handed, with the optimizer "
                "and loaders), and migrate again",
            )

    def _built_here_without_forward(self, call: cst.Call) -> bool:
        """The method's receiver is built in this file from a class whose
        forward raises NotImplementedError: ``visit_Call`` reports it there."""
        receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
        if receiver is None:
            return False
        for cls in instance_classes(self.index, receiver):
            parsed = ast_class(cls)
            if parsed is not None and unimplemented_forward(parsed):
                return True
        for fact in instance_facts(self.index, receiver):
            built = fact if fact.kind == "class" else fact.model_class
            if built is not None and built.unimplemented_forward:
                return True
        return False

    def _local(self, node: cst.Call) -> str:
        cls = self.index.local_class(node.func)
        if cls is None or cls not in self.index.local_subclasses(["torch.nn."]):
            return ""
        parsed = ast_class(cls)
        return unimplemented_forward(parsed) if parsed is not None else ""

    def _imported(self, node: cst.Call) -> str:
        fact = self.index.helper(node.func)
        if fact is None or fact.returns != "model":
            return ""
        built = fact if fact.kind == "class" else fact.model_class
        if built is None or not built.unimplemented_forward:
            return ""
        return f"`{snippet(node)}` builds {built.where}: {built.unimplemented_forward}"
