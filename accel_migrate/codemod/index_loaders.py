"""The data loaders of a module: the variables and containers that hold them, and
the loops that read them (``ModuleIndex.loaders``, ``loader_loop``)."""

from __future__ import annotations

from functools import cached_property

import libcst as cst
import libcst.matchers as m

from . import subtrees
from .index_syntax import (
    _LOOP_QUALNAMES,
    _LOOP_WRAPPERS,
    Key,
    assigned_targets,
    attr_chain,
    method_call,
)


class LoaderFacts:
    """A part of ``ModuleIndex`` (``analysis``): its methods read the index's
    tree, scopes and variables."""

    @cached_property
    def loaders(self) -> set[Key]:
        from .patterns import is_loader_seed
        from .project_callers import given_by_callers

        # parameters every call from the batch's other files hands a loader
        handed = set(given_by_callers(self, "loader"))
        if self.project.library_for:
            # a helper module migrated for its callers: the loaders it builds are
            # theirs to shard where they call it (AM102); those they hand it are
            # sharded
            return (
                self.tagged(lambda e: self.key(e) in handed, through=self._loop_wrapped)
                | handed
            )
        items = self._container_items
        found = self.tagged(
            lambda e: is_loader_seed(self, e)
            or self._loader_item(e)
            or self.key(e) in items
            or self.key(e) in handed,
            through=self._loop_wrapped,
            returns=True,
            positional=self._unpacked_loader,
        )
        return found | items | handed

    def _unpacked_loader(self, value: cst.BaseExpression, i: int, n: int) -> bool:
        """``train_loader, val_loader = utils.get_loaders(args)``: item ``i`` of a
        tuple of loaders a local module's function returns (AM006 prepares them
        there), or of ``map(accel.prepare_dataloader, ...)`` (what it writes); of
        a tuple with ``None`` or numbers beside the loaders (``accel.
        prepare_dataloaders(...)``, AM006's), the loaders' items only."""
        from .patterns import (
            loader_tuple_helper,
            prepared_loader_map,
            prepared_loader_tuple,
        )

        if prepared_loader_map(self, value):
            return True
        inner = prepared_loader_tuple(self, value)
        helper = loader_tuple_helper(self, value if inner is None else inner, True)
        return (
            helper is not None
            and len(helper.items) == n
            and helper.items[i] == "loader"
        )

    @cached_property
    def _direct_loaders(self) -> set[Key]:
        """Variables holding a loader, not counting those taken out of containers."""
        from .patterns import is_loader_seed

        return self.tagged(
            lambda e: is_loader_seed(self, e),
            through=self._loop_wrapped,
            returns=True,
            positional=self._unpacked_loader,
        )

    @cached_property
    def _container_items(self) -> set[Key]:
        """Loop variables that step through a container of loaders:
        ``for name, loader in loaders.items()``, ``for loader in loaders.values()``,
        ``for loader in [train_loader, val_loader]``."""
        found: set[Key] = set()
        for loop in self.for_loops:
            iterable, target = loop.iter, loop.target
            method = method_call(iterable, "items", "values")
            if method is not None and not iterable.args:  # type: ignore[attr-defined]
                if not self.holds_tagged(method.value, self.loader_containers):
                    continue
                if method.attr.value == "items":
                    if not (
                        isinstance(target, (cst.Tuple, cst.List))
                        and len(target.elements) == 2
                    ):
                        continue
                    target = target.elements[1].value
            elif not (
                self.holds_tagged(iterable, self.loader_containers)
                or self._holds_loaders(iterable)
            ):
                continue
            key = self.key(target)
            if key is not None:
                found.add(key)
        return found

    def _loop_wrapped(self, expr: cst.BaseExpression) -> cst.BaseExpression | None:
        """``tqdm(loader, ...)``, ``enumerate(loader)``, ``iter(loader)``: the
        iterable such a wrapper steps through (its first positional argument);
        also ``(Batch(b[0], b[1], pad) for b in loader)``, a generator of one
        item per batch (annotated-transformer's run_epoch argument)."""
        if (
            isinstance(expr, cst.GeneratorExp)
            and expr.for_in.inner_for_in is None
            and not expr.for_in.ifs
            and expr.for_in.asynchronous is None
        ):
            return expr.for_in.iter
        if not isinstance(expr, cst.Call) or not expr.args:
            return None
        first = expr.args[0]
        if first.keyword is not None or first.star:
            return None
        name = attr_chain(expr.func) or ""
        if name in _LOOP_WRAPPERS or self.qualnames(expr.func) & _LOOP_QUALNAMES:
            return first.value
        callee = self.callee(expr)  # type: ignore[attr-defined]
        if (
            callee is not None
            and callee[1] == 0
            and self.function_syntax.repeats_first(callee[0])  # type: ignore[attr-defined]
        ):
            return first.value  # `cycle(loader)`: yields the loader's batches
        return None

    @cached_property
    def augmented(self) -> dict[Key, list[cst.AugAssign]]:
        """``total += term``: the augmented assignments to each variable
        (``values`` has its plain assignments only)."""
        found: dict[Key, list[cst.AugAssign]] = {}
        for node in subtrees.findall(self.module, m.AugAssign()):
            assert isinstance(node, cst.AugAssign)
            key = self.key(node.target)
            if key is not None:
                found.setdefault(key, []).append(node)
        return found

    @cached_property
    def loader_containers(self) -> set[Key]:
        """Variables holding a dict or list of data loaders
        (``loaders = {x: DataLoader(...) for x in ["train", "val"]}``,
        ``{"val": val_loader}``), parameters given one included, by this file's
        calls or by every call from the batch's other files (``train(model,
        loaders={"train": tl, "val": vl})``: kind "loaders", ``project_callers``)."""
        from .project_callers import given_by_callers

        handed = set(given_by_callers(self, "loaders")) | self._item_loaders
        return (
            self.tagged(
                lambda e: self._holds_loaders(e) or self.key(e) in handed,
                returns=True,
            )
            | handed
        )

    @cached_property
    def _item_loaders(self) -> set[Key]:
        """Dicts filled with loaders item by item, every value stored in them a
        loader (reproduce-chexnet's ``dataloaders = {}`` then
        ``dataloaders['train'] = DataLoader(...)``), each bound to ``{}`` only."""
        from .patterns import is_loader_seed

        stores: dict[Key, list[bool]] = {}
        for node in subtrees.findall(self.module, m.Assign()):
            assert isinstance(node, cst.Assign)
            for target in node.targets:
                if isinstance(target.target, cst.Subscript):
                    key = self.key(target.target.value)
                    if key is not None:
                        stores.setdefault(key, []).append(
                            is_loader_seed(self, node.value)
                        )
        return {
            key
            for key, seeds in stores.items()
            if all(seeds)
            and self.values.get(key)
            and all(
                isinstance(v, cst.Dict) and not v.elements
                for v in self.values.get(key, [])
            )
        }

    def _holds_loaders(self, expr: cst.BaseExpression | None) -> bool:
        """A dict, list or tuple display (or comprehension) of data loaders, or
        a call of a local module's function returning a dict of them (AM006
        prepares each where it is called)."""
        from .patterns import is_loader_seed, loader_dict_helper

        if expr is not None and loader_dict_helper(self, expr) is not None:
            return True
        if isinstance(expr, (cst.DictComp, cst.ListComp)):
            elements = [expr.value if isinstance(expr, cst.DictComp) else expr.elt]
        elif isinstance(expr, cst.Dict):
            elements = [
                e.value for e in expr.elements if isinstance(e, cst.DictElement)
            ]
        elif isinstance(expr, (cst.List, cst.Tuple)):
            elements = [e.value for e in expr.elements]
        else:
            return False
        return any(
            is_loader_seed(self, e) or self.holds_tagged(e, self._direct_loaders)
            for e in elements
        )

    def _loader_item(self, expr: cst.BaseExpression) -> bool:
        """``loaders["train"]``, ``loaders[phase]``: one loader of a container;
        also ``data_loader[0]``, a constant item of a parameter that every call
        from the batch's other files hands a container of loaders or, on
        another path, one loader (kind "loader or loaders": a DataLoader has no
        items, so where the subscript runs it was handed the container)."""
        if not isinstance(expr, cst.Subscript):
            return False
        if self.holds_tagged(expr.value, self.loader_containers):
            return True
        return (
            len(expr.slice) == 1
            and m.matches(expr.slice[0].slice, m.Index(value=m.Integer()))
            and self.key(expr.value) in self._loaders_or_loader
        )

    @cached_property
    def _loaders_or_loader(self) -> set[Key]:
        """Parameters every batch call hands a container of loaders, or on some
        path one loader (``project_callers``: kinds "loaders", "loader or
        loaders"), at least one call the latter."""
        from .project_callers import given_by_callers

        return set(given_by_callers(self, ("loaders", "loader or loaders")))

    def _enumerated(self, iterable: cst.BaseExpression) -> bool:
        """Is ``iterable`` a name that the loop's block bound just before, by a
        plain assignment, to ``enumerate`` over a loader (through ``tqdm``)?
        igebm's ``loader = tqdm(enumerate(sample_data(loader)))`` then ``for i,
        (pos_img, pos_id) in loader:``: ``i`` counts the loop's steps, as the
        ``enumerate`` in the loop's own header would."""
        loop = self.parent(iterable)
        if not isinstance(iterable, cst.Name) or not isinstance(loop, cst.For):
            return False
        block = self.parent(loop)
        body = list(getattr(block, "body", ()))
        if loop not in body:
            return False
        name = iterable.value
        for statement in reversed(body[: body.index(loop)]):
            if not subtrees.findall(statement, m.Name(value=name)):
                continue  # neither binds nor reads it
            if not isinstance(statement, cst.SimpleStatementLine):
                return False  # may bind it (a loop, a branch, a `with`)
            targets = [t for s in statement.body for t in assigned_targets(s)]
            named = [t for t in targets if subtrees.findall(t, m.Name(value=name))]
            if not named:
                continue  # reads it only
            line = statement.body[0]
            return (
                len(statement.body) == 1
                and isinstance(line, cst.Assign)
                and len(line.targets) == 1
                and isinstance(line.targets[0].target, cst.Name)
                and self._counted(line.value)
            )
        return False

    def _counted(self, value: cst.BaseExpression) -> bool:
        """``enumerate(...)``, or ``tqdm``/``iter`` of one: what a loop over it
        takes first is the count of its steps."""
        while isinstance(value, cst.Call) and value.args:
            name = attr_chain(value.func) or ""
            qualnames = self.qualnames(value.func)
            if name == "enumerate" or "builtins.enumerate" in qualnames:
                return True
            if name == "zip" or "builtins.zip" in qualnames:
                return False  # its items are tuples of the zipped values
            if not (name in _LOOP_WRAPPERS or qualnames & _LOOP_QUALNAMES):
                return False
            value = value.args[0].value
        return False

    def loader_loop(self, iterable: cst.BaseExpression) -> tuple[bool, bool]:
        """Does a ``for`` over ``iterable`` step through a data loader? And is its first
        target an ``enumerate`` counter? (``enumerate``/``zip``/``tqdm`` see through.)
        """
        from .patterns import is_loader_seed

        if self.holds_tagged(iterable, self.loaders) or (
            # a helper module's own loaders are sharded by its callers, if at all
            not self.project.library_for
            and (is_loader_seed(self, iterable) or self._loader_item(iterable))
        ):
            return True, self._enumerated(iterable)
        if isinstance(iterable, cst.Call) and iterable.args:
            name = attr_chain(iterable.func) or ""
            qualnames = self.qualnames(iterable.func)
            if name in _LOOP_WRAPPERS or qualnames & _LOOP_QUALNAMES:
                positional = [arg.value for arg in iterable.args if arg.keyword is None]
                if any(self.loader_loop(arg)[0] for arg in positional):
                    return (
                        True,
                        name == "enumerate" or "builtins.enumerate" in qualnames,
                    )
        return False, False


def repeats_first(function: cst.FunctionDef) -> bool:
    """Is ``function`` a generator that yields each item of its first parameter,
    once or over and over (``def cycle(dl): while True: for x in dl: yield x``,
    also ``yield from dl``)? Its calls step through that iterable's items."""
    params = function.params.params
    if not params or not isinstance(function.body, cst.IndentedBlock):
        return False
    source = params[0].name.value
    body = [s for s in function.body.body if not _docstring(s)]
    if len(body) == 1 and m.matches(body[0], m.While(test=m.Name("True"), orelse=None)):
        inner = body[0].body  # type: ignore[attr-defined]
        body = list(inner.body) if isinstance(inner, cst.IndentedBlock) else []
    if len(body) != 1:
        return False
    statement = body[0]
    if m.matches(
        statement,
        m.SimpleStatementLine([m.Expr(m.Yield(value=m.From(item=m.Name(source))))]),
    ):
        return True
    if not (
        isinstance(statement, cst.For)
        and statement.orelse is None
        and m.matches(statement.iter, m.Name(source))
        and isinstance(statement.target, cst.Name)
        and isinstance(statement.body, cst.IndentedBlock)
        and len(statement.body.body) == 1
    ):
        return False
    return m.matches(
        statement.body.body[0],
        m.SimpleStatementLine([m.Expr(m.Yield(value=m.Name(statement.target.value)))]),
    )


def _docstring(statement: cst.BaseStatement) -> bool:
    return m.matches(statement, m.SimpleStatementLine([m.Expr(m.SimpleString())]))
