"""AM007 tensor-backward: ``loss.backward(...)`` becomes ``accel.backward(loss, ...)``.

## What
Rewrites ``x.backward(...)`` on tensors, arguments kept
(``retain_graph=True``, a gradient tensor), and ``torch.autograd.backward(tensors,
grad_tensors, ...)`` (one tensor or a list of them) to ``accel.backward(tensors,
gradient, ...)``. The runtime is told how the loss reduces the batch, as the
shared analysis (``codemod/reduction.py``) finds it: ``reduction="sum"`` for a
sum over the batch (a loss function's ``reduction="sum"``, ``torch.sum(...)``
terms, a helper of the file that returns ``BCE + KLD``), and ``count=`` for a
mean over tokens (``CrossEntropyLoss(ignore_index=pad)`` gets
``count=(target != pad).sum()``, a masked mean ``(l * mask).sum() / mask.sum()``
gets ``count=mask.sum()``, a cross-entropy with class ``weight=w`` gets
``count=accel.class_weight_count(w, target)``: its mean divides by the weights of
the targets). A ``backward`` method of the user's own objects is
left alone: calls on ``self``, on ``super()``, inside a method that is itself
named ``backward`` (custom autograd functions), and on variables holding
instances of this file's classes (other than ``nn.Module`` outputs). So is a
``backward`` function of another module: ``dist_autograd.backward(...)`` is
already-distributed RPC code.

## Why
``accel.backward`` applies what the strategy and precision need before the real
``backward``: the fp16 loss scale, and a weight that keeps the averaged gradient
equal to the gradient of the global batch. That weight depends on the loss's
reduction: a mean over samples is weighted by the process's share of the
samples (exact for a short last batch too), a sum by 1 (the global loss is the
sum of the processes' sums), a mean over tokens by its share of all processes'
tokens. ``accel.global_loss`` of that loss, in logs, combines it the same way.

## Example
```python
# before
def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x, reduction="sum")
    return BCE - 0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())

loss = loss_function(recon, data, mu, logvar)
loss.backward()
loss = criterion(logits.view(-1, vocab), target.view(-1))  # ignore_index=PAD
loss.backward()
# after
loss = loss_function(recon, data, mu, logvar)
accel.backward(loss, reduction="sum")
loss = criterion(logits.view(-1, vocab), target.view(-1))  # ignore_index=PAD
accel.backward(loss, count=(target.view(-1) != PAD).sum())
```

## Fix safety
Safe where the reduction is known; a loss with no sign of another is a mean over
samples, the default of every ``torch.nn`` loss. The call is rewritten in every
case, but reported as needs-review, with the mean weighting, where the reduction
is not known: a ``reduction=`` that is not written in the file, class
``weight=`` of a cross-entropy that cannot be read again at the backward (a
``F.cross_entropy(..., weight=torch.tensor([...]))`` call; a loss module's are read
as ``criterion.weight``), a sum plus a mean, a reduction passed through
``sqrt``/``log``, a ``reduction="sum"`` loss weighted by values its function
computes (SiamFC's ``BalancedLoss``: ``F.binary_cross_entropy_with_logits(x, y,
weight, reduction="sum")`` with ``weight /= weight.sum()``, a weighted mean over
the batch, not a sum), or a token mean whose count cannot be written at the backward
(the target is reassigned in between, or the loss is computed in a helper),
or a loss unpacked from the tuple a function of another local module returns
(``loss, parts = compute_loss(...)``) where the project view reads no loss of a
known reduction at that position (PyTorch-YOLOv3's box term, a mean over the
targets matched to anchors), or a loss unpacked from a call of a callable
handed in as a parameter (annotated-transformer's ``loss, loss_node =
loss_compute(out, batch.tgt_y, batch.ntokens)`` in ``run_epoch(data_iter,
model, loss_compute, ...)``: a ``SimpleLossCompute`` dividing a summed KL
divergence by the batch's token count, whose reduction is not read).
``torch.autograd.backward`` of losses with different reductions is reported
too (one call gets one weight). So is ``backward(retain_graph=True)``: a
second backward through the same forward is averaged by the runtime under DDP
and FSDP (by hand after every backward, for a model whose first backward leaves
parameters without a gradient, see docs/runtime.md), not under DeepSpeed;
adding the losses and calling backward once is exact everywhere and faster,
except where each backward reaches only its own parameters (``inputs=``, a
VAE-GAN's encoder, decoder and discriminator, each stepped by its own
optimizer), which the finding says instead. And so is a loss that goes through a statistic
of the batch (``x.var(0)``, ``(f.mean(0) - g.mean(0)).pow(2)``, as in feature
matching; ``X.std()`` over the whole tensor; followed through ``loss += term``
and into what a local function returns, as DRAGAN's
``compute_gradient_penalty(D, X)`` taken at ``X + 0.5 * X.std() * noise``), or
through targets that a
local function run without gradient normalises over the batch (SwAV's
Sinkhorn-Knopp codes, ``q = sinkhorn(out)`` dividing by ``torch.sum(Q)``): each
process computes it over its own share of the batch, which no
weighting of the per-process losses turns back into the original's. The same
holds for a loss that compares the batch's samples with each other: a
contrastive loss over ``torch.mm(z, z.t())`` (in-batch negatives), a batch-hard
triplet loss over ``torch.cdist(emb, emb)``, a similarity matrix of
``a.unsqueeze(1)`` against ``b.unsqueeze(0)``, a distance matrix
``x.unsqueeze(1).expand(n, m, d) - y.unsqueeze(0).expand(n, m, d)`` (the
Prototypical Networks' loss: every query against the class prototypes averaged
from the episode's support rows), the hardest samples of the batch
kept by rank (online hard example mining: ``losses.topk(k)``,
``losses.sort(descending=True)`` over the batch; Co-teaching's
``np.argsort(loss_1.data)`` keeping the smallest), also computed in a helper
function or a loss module of the file (``codemod/reduction/pairwise.py``), or
of a helper module, also one returning ``loss, acc`` (a ranking: in a loss
function of a helper module). The finding says how the
runtime weighs it (as a mean over each process's share of the samples), which
does not give back the original. A plain
mean over the batch of per-sample losses (``losses.mean(0)`` as the whole loss)
is fine. A mean loss over the rows a mask or indices select
(``F.smooth_l1_loss(box[pos], target[pos])`` with ``pos = labels > 0``,
``cross_entropy(logits[labelled], y[labelled])``, rows from ``.nonzero()``) is
reported: it averages over a number of rows that differs between the
processes' shares.
A criterion with class ``weight=`` that is handed in as a parameter or built
in branches (LDAM-DRW's ``nn.CrossEntropyLoss(weight=per_cls_weights)`` or
``LDAMLoss(..., weight=...)`` handed to ``train(..., criterion, ...)``) is
reported: its mean divides by the weights of each process's targets, a count
written only for one module built where the loss is
(``codemod/reduction/traced_criteria.py``).
A loss over packed sequences (an argument from ``pack_padded_sequence``) gets
``count=target.numel()``. A ``cross_entropy`` without ``ignore_index`` is a mean over
tokens, with the count ``(y != -100).sum()``, in a file that writes -100 into
its targets or uses a Hugging Face collator that pads labels with it; elsewhere
it is taken as a mean over samples. A loss the ``forward`` of a model class of
another local file computes and returns (minGPT's ``return logits, loss``, read
by ``logits, loss = model(x, y)``) keeps the reduction learnt there: a
``cross_entropy(..., targets.view(-1), ignore_index=-1)`` of a ``forward``
parameter gets ``count=(y != -1).sum()`` of the argument passed for it, and a
token mean whose count cannot be written so (shifted targets, an
``ignore_index`` that is not an integer literal) is needs-review, naming the
file. The same holds for a model class of the migrated file itself, and the
model is followed to its class through a factory (``get_model(cfg)`` whose
every return builds one class), the parameters of the file's functions (every
call must pass a model of that class: ``def train(model, loader, opt)``) and
``self.model`` of a class (``self.model = model`` in ``__init__``,
``Trainer(GPT(cfg), ...)``; ``codemod/reduction/model_classes.py``). A loss
unpacked from a model whose class cannot be told (``getattr(models,
args.arch)(...)``, ``torch.load(path)``, a function the file does not call),
also ``outputs[0]`` of ``outputs = model(**batch)`` (a Hugging Face model's
``return_dict=False`` form), is needs-review: its forward's reduction is not
seen, and a mean over tokens would need ``count=``. A loss the model computes itself
(``outputs.loss``, also of a model handed in as a parameter) is reported:
Hugging Face models average it over the label tokens that are not -100, a
count the analysis cannot see, and the runtime weighs it as a mean over samples
(exact only where every sample has the same number of label tokens). So is the sum of a
dict of losses a model or criterion returned (``losses = sum(loss for loss in
loss_dict.values())`` after ``loss_dict = model(images, targets)``, as in
torchvision's detection references and DETR), whose losses may be normalised by
a count of the batch (objects, boxes), and the sum of any dict's values whose
reductions the analysis does not read (it is not a sum over the batch; the
values of a dict literal, also one a helper of the file returns, are read).
None of these concerns holds where no data loader is sharded and no loop
around the backward reads data (``unsplit_steps.same_on_every_process``:
SASRec's batches from its own sampler, a whole graph): every process computes
the loss over the whole batch, and the runtime weighs it as the whole loss
whatever its reduction, so the finding is fixed and says so.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst
import libcst.matchers as m
from libcst.metadata import QualifiedNameSource

from ..analysis import attr_chain
from ..batch_statistics import BatchStatistics
from ..names import MODULE_BASES
from ..reduction import LossReduction, loss_reduction
from ..reduction.pairwise import pairwise_comparison
from ..rule import Rule, keyword_arg
from ..unsplit_steps import same_on_every_process


class TensorBackward(BatchStatistics, Rule):
    code = "AM007"
    name = "tensor-backward"
    summary = "loss.backward() -> accel.backward(loss)"

    @cached_property
    def non_tensor_classes(self) -> set[cst.ClassDef]:
        modules = self.index.local_subclasses(MODULE_BASES)
        return {cls for cls in self.index.classes if cls not in modules}

    def _user_object(self, receiver: cst.BaseExpression) -> bool:
        if isinstance(receiver, cst.Name) and receiver.value in {"self", "cls"}:
            return True
        if isinstance(receiver, cst.Call) and m.matches(receiver.func, m.Name("super")):
            return True
        key = self.index.key(receiver)
        if key is None:
            return False
        for value in self.index.values.get(key, ()):
            if (
                isinstance(value, cst.Call)
                and self.index.local_class(value.func) in self.non_tensor_classes
            ):
                return True
        return False

    def _in_backward_method(self, node: cst.CSTNode) -> bool:
        function = self.index.enclosing_function(node)
        return function is not None and function.name.value == "backward"

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        func = original_node.func
        if self.qualnames(func) & _AUTOGRAD_BACKWARD:
            return self._autograd_backward(original_node, updated_node)
        if not (isinstance(func, cst.Attribute) and func.attr.value == "backward"):
            return updated_node
        if self.index.is_runtime_call(original_node, "backward"):
            return updated_node  # already migrated
        names = self.qualnames(func)
        if names & _RPC_BACKWARD or self._imported(func.value):
            # A module's function, not a tensor's method: dist_autograd.backward
            # belongs to already-distributed RPC code and is never rewritten.
            self.report(
                original_node,
                "needs-review",
                f"`{attr_chain(func)}(...)` is a module's function, not a tensor's backward: left as it is",
            )
            return updated_node
        if self._user_object(func.value) or self._in_backward_method(original_node):
            return updated_node
        if any(arg.star for arg in original_node.args):
            self.report(original_node, "needs-review", "backward(*args): left as it is")
            return updated_node
        updated_func = updated_node.func
        assert isinstance(updated_func, cst.Attribute)
        receiver = (
            updated_func.value.with_changes(lpar=(), rpar=())
            if updated_func.value.lpar
            else updated_func.value
        )
        args = [cst.Arg(value=receiver), *updated_node.args]
        return self._rewritten(
            original_node, [func.value], args, "x.backward() -> accel.backward(x", 1
        )

    def _rewritten(
        self,
        original: cst.Call,
        losses: list[cst.BaseExpression],
        args: list[cst.Arg],
        what: str,
        retain_position: int,
    ) -> cst.Call:
        """``accel.backward(*args)`` told the reduction of ``losses``, with one
        finding. The call is rewritten either way (accel.backward is what every
        process must call); a concern makes it needs-review, not also "fixed"."""
        concerns = []
        statistics = {self._batch_statistic(loss) for loss in losses} - {None}
        pairs = {pairwise_comparison(self.index, loss, original) for loss in losses} - {
            None
        }
        reduction, reduction_concern = self._reduction(original, losses)
        if statistics or pairs:
            # Already a concern of its own; no weighting of the shares is right.
            reduction, reduction_concern = LossReduction("mean"), None
        unsplit = ""
        if (statistics or pairs or reduction_concern) and same_on_every_process(
            self.index, original
        ):
            # SASRec's batches from a sampler, not a loader: no process holds a
            # share, so none of these concerns is true (``unsplit_steps``)
            unsplit = (
                ": no data loader is sharded here, so every process computes this "
                "loss over the whole batch, and the runtime weighs it as the whole "
                "loss, whatever its reduction"
            )
            statistics, pairs, reduction_concern = set(), set(), None
        if reduction_concern:
            concerns.append(reduction_concern)
        for statistic in sorted(statistics):  # type: ignore[type-var]
            concerns.append(
                f"the loss goes through a statistic of the batch (`{statistic}`): each process computes it over its share of the batch only, so the loss and its gradients differ from the original's"
            )
        for pair in sorted(pairs):  # type: ignore[type-var]
            concerns.append(
                f"the loss compares the samples of the batch with each other ({pair}): each process compares only its share's samples (fewer negatives, other hardest pairs, prototypes or samples), and the runtime weighs each process's loss as a mean over its share of the samples, which does not make their average the original's loss or gradients; compute it on the outputs gathered from every process"
            )
        if self._retains_graph(original, retain_position):
            # With `inputs=` each backward reaches its own parameters (a
            # VAE-GAN's encoder, decoder and discriminator, each stepped by its
            # own optimizer): one backward of the sum is not the same.
            alternative = (
                "the backward reaches only the parameters given by inputs=, so the "
                "losses cannot be added into one backward"
                if any(a.keyword and a.keyword.value == "inputs" for a in original.args)
                else "adding the losses and calling accel.backward once is exact "
                "under every strategy and faster"
            )
            concerns.append(
                "retain_graph=True: the runtime averages a second backward "
                "through the same forward under DDP and FSDP (by hand after every "
                "backward, without DDP's overlap, for a model whose first "
                "backward leaves parameters without a gradient); under --strategy "
                f"deepspeed this is untested; {alternative}"
            )
        told = ""
        if reduction.kind == "sum":
            args.append(keyword_arg("reduction", cst.SimpleString('"sum"')))
            told = ', reduction="sum"'
        elif reduction.kind == "token-mean" and reduction.count is not None:
            args.append(keyword_arg("count", reduction.count))
            told = ", count=..."
        message = f"{what}{told})"
        if concerns:
            self.report(
                original, "needs-review", f"{message}, but " + "; ".join(concerns)
            )
        elif reduction.kind == "sum":
            source = f" ({reduction.what})" if reduction.what else ""
            self.report(
                original, "fixed", f"{message}: the loss sums over the batch{source}"
            )
        elif told:
            self.report(
                original,
                "fixed",
                f"{message}: the loss is a mean over {reduction.what}, weighted by the count of all processes",
            )
        else:
            self.report(original, "fixed", message + unsplit)
        return self.runtime_call("backward", args)

    def _reduction(
        self, call: cst.Call, losses: list[cst.BaseExpression]
    ) -> tuple[LossReduction, str | None]:
        """The reduction the runtime is told, and a concern when it cannot be told."""
        found = [loss_reduction(self.index, loss, call) for loss in losses]
        first = found[0]
        if any(
            r.kind != first.kind
            or (r.count is None) != (first.count is None)
            or (
                r.count is not None
                and first.count is not None
                and not r.count.deep_equals(first.count)
            )
            for r in found[1:]
        ):
            return LossReduction("mean"), (
                "the losses reduce the batch differently (each gets the same weight); backpropagate them in separate calls"
            )
        if first.kind == "unknown":
            return first, (
                f"the loss's reduction is not known ({first.reason}); the runtime weighs it as a mean over samples"
            )
        if first.kind == "token-mean" and first.count is None:
            return first, (
                f"{first.reason}; the runtime weighs it as a mean over samples; pass count=<this process's count> to accel.backward"
            )
        return first, None

    def _autograd_backward(
        self, original: cst.Call, updated: cst.Call
    ) -> cst.BaseExpression:
        """``torch.autograd.backward(tensors, grad_tensors, retain_graph,
        create_graph, grad_variables, inputs)`` -> ``accel.backward(tensors,
        gradient, retain_graph, create_graph, inputs=inputs)``."""
        positional = [a for a in original.args if a.keyword is None]
        keywords = {a.keyword.value for a in original.args if a.keyword is not None}
        if (
            any(a.star for a in original.args)
            or len(positional) > 4
            or "grad_variables" in keywords
            or not (positional or "tensors" in keywords)
        ):
            self.report(
                original,
                "needs-review",
                "torch.autograd.backward(...) with these arguments is not rewritten: pass the tensors, grad_tensors, retain_graph, create_graph or inputs= by name",
            )
            return updated
        args = []
        tensors: cst.BaseExpression | None = None
        for before, after in zip(original.args, updated.args, strict=True):
            name = before.keyword.value if before.keyword is not None else None
            if name == "tensors" or (name is None and not args):
                tensors = before.value
                args.insert(
                    0, after.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT)
                )
            elif name == "grad_tensors":
                args.append(after.with_changes(keyword=cst.Name("gradient")))
            else:
                args.append(after)
        assert tensors is not None
        losses = (
            [e.value for e in tensors.elements]
            if isinstance(tensors, (cst.List, cst.Tuple)) and tensors.elements
            else [tensors]
        )
        if any(isinstance(loss, cst.StarredElement) for loss in losses):
            losses = [tensors]
        return self._rewritten(
            original,
            losses,
            args,
            "torch.autograd.backward(...) -> accel.backward(...",
            2,
        )

    def _imported(self, receiver: cst.BaseExpression) -> bool:
        """Is ``receiver`` an imported module or name (``dist_autograd``,
        ``torch.autograd``), not a variable of the script?"""
        return isinstance(receiver, (cst.Name, cst.Attribute)) and any(
            q.source is QualifiedNameSource.IMPORT
            for q in self.index.qualified_names.get(receiver, ())
        )

    @staticmethod
    def _retains_graph(call: cst.Call, position: int) -> bool:
        """``backward(retain_graph=...)`` with anything but False/None;
        ``position``: where the original call takes it positionally."""
        positional = [arg for arg in call.args if arg.keyword is None]
        named = [
            arg
            for arg in call.args
            if arg.keyword is not None and arg.keyword.value == "retain_graph"
        ]
        # Tensor.backward(gradient, retain_graph, ...): 1;
        # torch.autograd.backward(tensors, grad_tensors, retain_graph, ...): 2
        value = positional[position : position + 1] + named
        return any(
            not m.matches(arg.value, m.Name("False") | m.Name("None")) for arg in value
        )


_AUTOGRAD_BACKWARD = frozenset(
    {"torch.autograd.backward", "torch.autograd.__init__.backward"}
)
_RPC_BACKWARD = frozenset({"torch.distributed.autograd.backward"})
