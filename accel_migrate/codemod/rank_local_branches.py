"""What a branch of AM028 (``rank_local_decisions``) runs: a collective or a
training step, an exit out of a loop (or function) that trains, a scheduler
step or a learning-rate write, a save (and whether it saves samples, values
that differ between processes, or a model's state), a loss term that one side
alone adds to what a backward backpropagates.

A mixin of the rule: it reads the rule's ``index`` and ``qualnames``; the rule
decides from its answers which hazard a rank-dependent condition decides.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from .index_syntax import assigned_targets
from .model_reads import reads_in_chain, reads_model
from .rule import Rule
from .subtrees import findall

#: Runtime calls that are collectives (or may be: a state dict under FSDP).
_COLLECTIVES = (
    "reduce",
    "global_loss",
    "gather",
    "gather_in_order",
    "barrier",
    "save_state",
    "load_state",
    "backward",
)
_SAVES = frozenset({"torch.save"})
#: Libraries whose calls run nothing collective (``torch.distributed`` aside).
_LOCAL_LIBRARIES = (
    "builtins.",
    "os.",
    "json.",
    "pickle.",
    "logging.",
    "shutil.",
    "time.",
    "datetime.",
    "math.",
    "yaml.",
    "numpy.",
)
#: Runtime calls that run nothing collective (``accel.save`` writes on the
#: main process and returns on the others).
_RUNTIME_LOCAL = ("save", "print", "on_main_process", "is_main_process")
_CLOCKS = ("time.", "datetime.")
_SCHEDULERS = "torch.optim.lr_scheduler."
_NESTED_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


class BranchContents:
    """What the nodes a rank-dependent branch runs do (AM028's hazards)."""

    def _samples_saved(self, saves: list[cst.Call]) -> bool:
        """Does each save write a value that differs between processes itself
        (a sample), not a model's or optimizer's state, which every process
        holds alike, nor anything through a function of the file?"""
        leaves = self.index.divergence.local_values
        for save in saves:
            if not (
                self.qualnames(save.func) & _SAVES
                or self.index.is_runtime_call(save, "save")
            ):
                return False  # a function of the file that saves
            if not save.args or save.args[0].keyword is not None:
                return False
            saved = save.args[0].value
            inside = set(findall(saved, m.Name() | m.Attribute()))
            if not any(leaf in inside for leaf in leaves.get(save, [])):
                return False  # the same on every process: a model's state
            if any(
                m.matches(c, m.Call(func=m.Attribute(attr=m.Name("state_dict"))))
                or self.index.is_runtime_call(c, "state_dict")
                for c in findall(saved, m.Call())
            ):
                return False
        return True

    def _changes_backpropagated(self, node: cst.CSTNode) -> bool:
        """Does one side of the branch only assign a loss that a backward of its
        scope then backpropagates (``if pos.any(): loss = loss + box_loss`` before
        ``loss.backward()``, no ``else``)? A loss assigned on both sides (teacher
        forcing or not, through the same decoder) is not this hazard."""
        if not isinstance(node, cst.If):
            return False  # a loop's rounds add terms through the same parameters
        sides = [node.body, node.orelse]
        assigned = [
            self._assigned(side) if side is not None else set() for side in sides
        ]
        keys = assigned[0] ^ assigned[1]
        if not keys:
            return False
        scope = self.index.enclosing_function(node) or self.index.module
        for call in findall(scope, m.Call()):
            if not self.index.is_backward_call(call):
                continue
            if self.index.is_runtime_call(call, "backward"):
                loss = call.args[0].value if call.args else None  # type: ignore[attr-defined]
            else:
                loss = call.func.value  # type: ignore[attr-defined]  # `loss.backward()`
            if loss is not None and any(
                self.index.key(name) in keys
                for name in (loss, *findall(loss, m.Name()))
            ):
                return True
        return False

    def _assigned(self, block: cst.CSTNode) -> set:
        keys = set()
        for statement in run_by(block):
            for target in assigned_targets(statement):
                key = self.index.key(target)
                if key is not None:
                    keys.add(key)
        return keys

    def _reads_clock(self, test: cst.BaseExpression) -> bool:
        return any(
            any(q.startswith(_CLOCKS) for q in self.qualnames(call.func))  # type: ignore[attr-defined]
            for call in findall(test, m.Call())
        )

    def _collective(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Call):
            # its own text, or a local function it calls (``reached_calls``)
            return any(
                self.index.is_runtime_call(call, *_COLLECTIVES)
                for call in (node, *self.index.reached_calls.through(node))
            )
        if isinstance(node, cst.BaseStatement):
            return self.index.divergence.trains(node)
        return False

    def _collective_reached(self, node: cst.CSTNode) -> cst.Call | None:
        """The runtime collective that ``node`` (a call the branch runs) is,
        or that a local function it calls runs (``reached_calls``)."""
        if not isinstance(node, cst.Call):
            return None
        for call in (node, *self.index.reached_calls.through(node)):
            if self.index.is_runtime_call(call, *_COLLECTIVES):
                return call
        return None

    def _model_read(
        self, test: cst.BaseExpression, run: list[cst.CSTNode]
    ) -> cst.CSTNode | None:
        """A read of a prepared model's parameters or forward (``model_reads``)
        that the branch runs, where its test picks processes by rank (the
        launcher's variable, or the runtime's main-process test): those are
        the branches other processes surely skip. (Under a test on a value of
        the data, as a loop over a batch's rows, a forward is left to the
        analysis of training steps, as before.)"""
        read = next((n for n in run if reads_in_chain(self.index, n)), None)
        if read is None or self._main_process(test):  # type: ignore[attr-defined]
            return read
        source = self.index.rank_local_sources.first(test)
        return read if source is not None and source.kind == "environment" else None

    def _only_local_calls(self, run: list[cst.CSTNode]) -> bool:
        """Does the branch provably reach nothing collective: no training step,
        and every call it runs (those of the local functions it calls
        included) is ``torch.save``, a runtime call that writes or prints, or
        one of a library that runs no collective (``os.path.join``,
        ``logging``, a logger's method): no state dict (gathered by a
        collective under FSDP), no call of ``torch.distributed``, no
        function of the project, no method of an object it cannot name, no
        read of a prepared model's parameters or forward (``model_reads``:
        ``float(model.weight[0, 0])`` gathers the shards under FSDP)?"""
        if any(reads_model(self.index, node) for node in run):
            return False
        for node in run:
            if isinstance(node, cst.BaseStatement) and self.index.divergence.trains(
                node
            ):
                return False
            if not isinstance(node, cst.Call):
                continue
            for call in (node, *self.index.reached_calls.through(node)):
                if self.index.callee(call) is not None:
                    continue  # a local function: its calls are in the walk
                if not self._local_call(call):
                    return False
        return True

    def _local_call(self, call: cst.Call) -> bool:
        if self.index.is_runtime_call(call, *_RUNTIME_LOCAL):
            return True
        names = self.qualnames(call.func)
        if not names:
            return False
        return all(
            n in _SAVES
            or (n.startswith(_LOCAL_LIBRARIES) and not n.startswith("os.environ"))
            for n in names
        )

    def _exits(self, node: cst.CSTNode, run: list[cst.CSTNode]) -> str | None:
        """A break, continue or return under ``node`` that leaves a loop (or a
        function) that trains, evaluates or runs a collective: "continue" when
        every such exit is a ``continue`` (a skipped step), "exit" otherwise."""
        loops = [
            a for a in self.index.ancestors(node) if isinstance(a, (cst.For, cst.While))
        ]
        found = None
        for exit_node in run:
            if isinstance(exit_node, (cst.Break, cst.Continue)):
                if _loop_of(self, exit_node, node) is not None:
                    continue  # leaves a loop inside the decision only
                if loops and self._heavy(loops[0]):
                    if not isinstance(exit_node, cst.Continue):
                        return "exit"
                    found = "continue"
            elif isinstance(exit_node, cst.Return):
                function = self.index.enclosing_function(node)
                scope = function if function is not None else None
                if scope is not None and self._heavy(scope):
                    return "exit"
        return found

    def _heavy(self, node: cst.CSTNode) -> bool:
        """Does ``node`` train, evaluate or run a collective?"""
        body = getattr(node, "body", None)
        statements = list(getattr(body, "body", ())) if body is not None else []
        if any(self.index.divergence.trains(s) for s in statements):
            return True
        return any(
            isinstance(n, cst.Call) and self._collective(n) for n in run_by(node)
        )

    def _steps_scheduler(self, call: cst.Call) -> bool:
        func = call.func
        if not (
            isinstance(func, cst.Attribute)
            and func.attr.value == "step"
            and call.args
            and call.args[0].keyword is None
        ):
            return False
        key = self.index.key(func.value)
        for value in self.index.values.get(key, []) if key is not None else []:
            if isinstance(value, cst.Call) and any(
                q.startswith(_SCHEDULERS) for q in self.qualnames(value.func)
            ):
                return True
        return False

    def _saves(self, call: cst.Call, depth: int) -> bool:
        if self.qualnames(call.func) & _SAVES or self.index.is_runtime_call(
            call, "save", "save_state"
        ):
            return True
        function = self.index.local_function(call.func)
        if function is None or depth > 2:
            return False
        return any(
            isinstance(n, cst.Call) and self._saves(n, depth + 1)
            for n in run_by(function.body)
        )


def run_by(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes that run when ``node`` runs: not the bodies it defines."""
    found: list[cst.CSTNode] = []

    class _Walk(cst.CSTVisitor):
        def on_visit(self, inner: cst.CSTNode) -> bool:
            if inner is not node and isinstance(inner, _NESTED_SCOPES):
                return False
            found.append(inner)
            return True

    node.visit(_Walk())
    return found


def _loop_of(
    rule: Rule, exit_node: cst.CSTNode, decision: cst.CSTNode
) -> cst.CSTNode | None:
    """The loop a break or continue leaves, when it is inside ``decision``."""
    for ancestor in rule.index.ancestors(exit_node):
        if ancestor is decision:
            return None
        if isinstance(ancestor, (cst.For, cst.While)):
            return ancestor
    return None


def sets_learning_rate(node: cst.CSTNode) -> bool:
    """``g["lr"] = ...``, ``param_group["lr"] *= ...``."""
    targets: list[cst.BaseExpression] = []
    if isinstance(node, cst.Assign):
        targets = [t.target for t in node.targets]
    elif isinstance(node, cst.AugAssign):
        targets = [node.target]
    return any(
        m.matches(
            t,
            m.Subscript(
                slice=[m.SubscriptElement(slice=m.Index(value=m.SimpleString()))]
            ),
        )
        and t.slice[0].slice.value.evaluated_value == "lr"  # type: ignore[attr-defined]
        for t in targets
    )
