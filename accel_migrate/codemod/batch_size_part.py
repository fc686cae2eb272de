"""What AM025's parts (``BufferFindings``, ``HandedSizes``) ask of the rule they
are mixed into (``rules/batch_size_shapes.py``): ``SizeRulePart`` names it for the
type checker, and is ``object`` at run time."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import libcst as cst

    from .analysis import ModuleIndex
    from .batches import LoaderLoop

    class SizeRulePart:
        index: ModuleIndex

        def _configured(self, expr: cst.BaseExpression, depth: int = 0) -> bool: ...
        def _loop(self, loop: cst.For) -> LoaderLoop | None: ...
        def _enclosing_loops(
            self, node: cst.CSTNode
        ) -> list[tuple[cst.For, LoaderLoop]]: ...
        def _what_size(self, spelled: str, expr: cst.BaseExpression) -> str: ...
        def _line(self, node: cst.CSTNode) -> int: ...
        def qualnames(self, node: cst.CSTNode) -> set[str]: ...
        def report(
            self,
            node: cst.CSTNode,
            status: str,
            message: str,
            *,
            if_migrated: bool = False,
        ) -> None: ...

else:
    SizeRulePart = object
