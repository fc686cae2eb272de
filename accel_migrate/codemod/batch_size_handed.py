"""AM025's findings about a batch size handed across calls (``HandedSizes``, a
part of the rule, ``rules/batch_size_shapes.py``): a parameter that every call
passes the loader's batch size (``train(model, loader, args.batch_size)``), one a
call passes an integer literal, the batch size handed to a function of the file
that shapes a tensor with it (``model.init_hidden(args.batch_size)``), and a
model of a local module whose class keeps the configured batch size as a shape."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from . import model_methods
from .analysis import attr_chain, bind_arguments
from .batch_shapes import same_size, shape_receiver, shaped_by, short_code
from .batch_size_part import SizeRulePart
from .subtrees import findall

if TYPE_CHECKING:
    from .batches import LoaderLoop

#: How many calls deep a batch size handed down as a parameter is followed.
_PARAMETER_DEPTH = 3
#: Calls named in a needs-review message about a parameter.
_CALLS_SHOWN = 3


class HandedSizes(SizeRulePart):
    """Mixed into AM025's rule, whose methods it uses: ``_configured`` (is an
    expression a configured batch size), ``_loop``, ``_enclosing_loops``,
    ``_what_size``, ``_line``, ``report``, ``index``."""

    def _passed(
        self, expr: cst.BaseExpression
    ) -> list[tuple[cst.Call, cst.BaseExpression | None]] | None:
        """For a parameter of a function of this file that its body never rebinds,
        what each call of the function passes it (None where a call passes it
        nothing this rule can read: its default, ``*args``); None when ``expr`` is
        no such parameter or nothing here calls the function."""
        if not isinstance(expr, cst.Name):
            return None
        key = self.index.key(expr)
        scope = key[0] if key is not None else None
        function = getattr(scope, "node", None)
        if not isinstance(function, cst.FunctionDef) or (
            self.index.function_scope_key(function, expr.value) != key
        ):
            return None
        if not all(isinstance(b.node, cst.Param) for b in scope[expr.value]):  # type: ignore[index]
            return None
        sites = self.index.call_sites(function)
        if not sites:
            return None
        found: list[tuple[cst.Call, cst.BaseExpression | None]] = []
        for site in sites:
            args = [a for k, a in self.index.arguments(site) if k == key]
            found.append((site, args[0] if len(args) == 1 else None))
        return found

    def _provably(
        self, size: cst.BaseExpression, loader_size: cst.BaseExpression, depth: int = 0
    ) -> bool:
        """Is ``size`` provably the value ``loader_size``: the same variable, or a
        parameter every call passes that variable (the loader's batch size handed
        down: ``train(model, loader, args.batch_size)``)?"""
        if same_size(self.index, size, loader_size, True):
            return True
        passed = self._passed(size) if depth < _PARAMETER_DEPTH else None
        return passed is not None and all(
            value is not None and self._provably(value, loader_size, depth + 1)
            for _, value in passed
        )

    def _handed_to_shape(self, call: cst.Call) -> None:
        """``hidden = model.init_hidden(args.batch_size)`` before the loop over
        the loader: a configured batch size handed to a function or method of
        this file that shapes a tensor with it (``weight.new_zeros(1, bsz,
        nhid)``), in a function that loops over a prepared loader."""
        target = self._shaping_callee(call)
        if target is None:
            self._handed_to_imported_shape(call)
            return
        function, bound = target
        for name, arg in bind_arguments(function, bound, call):
            if not isinstance(arg, (cst.Name, cst.Attribute)) or not self._configured(
                arg
            ):
                continue
            shape = shaped_by(self.index, function, name)
            if (
                shape is None
                or self._enclosing_loops(shape)  # reported there, through `_passed`
                or not self._loops_over_a_loader(call)
            ):
                continue
            spelled = attr_chain(arg) or "batch_size"
            self.report(
                call,
                "needs-review",
                f"{self._what_size(spelled, arg)} is handed to "
                f"`{function.name.value}`, which shapes a tensor with it "
                f"(`{short_code(shape)}`, line {self._line(shape)}), and what it makes "
                "is used with this loader's batches: with the global batch split "
                f"across processes each process's batch has {spelled} / N samples, "
                "so that shape is wrong at world size > 1; take the size from the "
                "batch (`x.size(0)`), or launch with `--batch-mode per-device`",
                if_migrated=True,
            )
            return

    def _handed_to_imported_shape(self, call: cst.Call) -> None:
        """``h = net.init_hidden(batch_size)`` where ``net`` holds a model of a
        class of another module of the project whose ``init_hidden`` shapes a
        tensor with that parameter (``HelperFact.param_shapes``)."""
        func = call.func
        if not isinstance(func, cst.Attribute) or not self.index.project:
            return
        from .imported_draws import instance_facts

        shapes = {
            (fact.where, param, position, code, line)
            for fact in instance_facts(self.index, func.value)
            for method, param, position, code, line in fact.param_shapes
            if method == func.attr.value
        }
        for where, param, position, code, line in sorted(shapes):
            arg = _argument(call, param, position)
            if not isinstance(arg, (cst.Name, cst.Attribute)) or not self._configured(
                arg
            ):
                continue
            if not self._loops_over_a_loader(call):
                return
            spelled = attr_chain(arg) or "batch_size"
            self.report(
                call,
                "needs-review",
                f"{self._what_size(spelled, arg)} is handed to "
                f"`{func.attr.value}` of {where}, which shapes a tensor with it "
                f"(`{code}`, line {line}), and what it makes is used with this "
                "loader's batches: with the global batch split across processes "
                f"each process's batch has {spelled} / N samples, so that shape is "
                "wrong at world size > 1; take the size from the batch "
                "(`x.size(0)`), or launch with `--batch-mode per-device`",
                if_migrated=True,
            )
            return

    def _shaping_callee(self, call: cst.Call) -> tuple[cst.FunctionDef, int] | None:
        """The function of this file ``call`` runs: a local function, or the one
        method of that name of the local classes its receiver may hold."""
        func = call.func
        if isinstance(func, cst.Name):
            return self.index.callee(call)
        if not isinstance(func, cst.Attribute):
            return None
        methods = {
            statement
            for cls in model_methods.instance_classes(self.index, func.value)
            for statement in cls.body.body
            if isinstance(statement, cst.FunctionDef)
            and statement.name.value == func.attr.value
        }
        return (methods.pop(), 1) if len(methods) == 1 else None

    def _loops_over_a_loader(self, node: cst.CSTNode) -> bool:
        """Is ``node`` in, or in a function (or module) with, a loop over a
        prepared loader?"""
        if self._enclosing_loops(node):
            return True
        scope = self.index.enclosing_function(node) or self.index.module
        return any(
            isinstance(loop, cst.For) and self._loop(loop) is not None
            for loop in findall(scope, m.For())
        )

    def _literal_parameter(
        self, call: cst.Call, loops: list[tuple[cst.For, LoaderLoop]]
    ) -> None:
        """``images.view(batch_size, -1)`` on the loop's batch, where
        ``batch_size`` is a parameter some call passes an integer literal
        (``log_images(model, loader, 32)``): likely the loader's batch size,
        which this rule cannot show; reported."""
        first = call.args[0] if call.args else None
        if first is None or first.keyword is not None or first.star:
            return
        passed = self._passed(first.value)
        if not passed or not any(isinstance(v, cst.Integer) for _, v in passed):
            return
        receiver = shape_receiver(call)
        key = self.index.key(receiver) if isinstance(receiver, cst.Name) else None
        if key is None or not any(key in info.batch for _, info in loops):
            return
        name = first.value.value  # type: ignore[attr-defined]
        self.report(
            call,
            "needs-review",
            f"`{name}`{self._handed_down(first.value)} is the first dimension of "
            f"a reshape of the batch `{receiver.value}` in a step: "  # type: ignore[union-attr]
            "with the global batch split across processes each process's batch has "
            "the loader's batch size / N samples, so if that literal is the loader's "
            "batch size this reshape fails at world size > 1; take the size from the "
            f"batch (`{receiver.value}.size(0)`), or launch with "  # type: ignore[union-attr]
            "`--batch-mode per-device`",
            if_migrated=True,
        )

    def _handed_down(self, expr: cst.BaseExpression) -> str:
        """`` (a parameter of `train()`; the call at line 40 passes `64`)``, for a
        parameter; empty otherwise."""
        passed = self._passed(expr)
        if not passed:
            return ""
        callee = self.index.callee(passed[0][0])
        name = callee[0].name.value if callee is not None else "a function"
        calls = "; ".join(
            f"line {self._line(site)} passes "
            + (
                f"`{cst.Module([]).code_for_node(value)}`"
                if value is not None
                else "no value it can read"
            )
            for site, value in passed[:_CALLS_SHOWN]
        )
        return f" (a parameter of `{name}()`: {calls})"

    def _batch_shaped_model(self, node: cst.Call) -> None:
        """``model = build_model(cfg)`` or ``SeqClassifier(cfg)`` of a local
        module whose model class keeps the configured batch size and shapes a
        tensor with it in ``forward`` (``HelperFact.batch_shape``), in a file
        that shards a loader: each process's batch has a share of that size."""
        fact = self.index.helper(node.func)
        if fact is None or fact.returns != "model":
            return
        shaped = fact if fact.kind == "class" else fact.model_class
        if shaped is None or not shaped.batch_shape or not self.index.loaders:
            return
        self.report(
            node,
            "needs-review",
            f"builds {shaped.where}, whose {shaped.batch_shape}: each process's "
            "batch holds its share of the configured batch size, so that shape "
            "has too many rows (a reshape fails or mixes samples); take the size "
            f"from the batch in {shaped.file} (`x.size(0)`), or launch with "
            "--batch-mode per-device",
        )


def _argument(call: cst.Call, name: str, position: int) -> cst.BaseExpression | None:
    """What ``call`` (of a method, ``self`` not counted) passes the parameter
    ``name`` at ``position``; None where it passes nothing readable."""
    for at, arg in enumerate(call.args):
        if arg.star:
            return None
        if arg.keyword is not None:
            if arg.keyword.value == name:
                return arg.value
        elif at == position:
            return arg.value
    return None
