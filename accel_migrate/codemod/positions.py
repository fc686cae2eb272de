"""Positions and code of a changed tree from one code generation, not two.

After a rule changes the tree, the next rules need its positions (libcst's
``PositionProvider``: a code generation that records where each node starts and
ends) and its code (``Module.code``: another code generation), to map a place back
to the user's file (``LineMap``). Both come from the same tokens: the provider's
codegen state collects exactly the strings ``Module.code`` joins. ``compute``
runs libcst's provider once, keeps the tokens it generated as the code, and puts
the positions where ``MetadataWrapper.resolve(PositionProvider)`` finds them, so
that every later reader of either pays nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState


class _CodeAndPositions(PositionProvider):
    """libcst's ``PositionProvider``, keeping the code its codegen produced."""

    code: str = ""

    def _gen_impl(self, module: cst.Module) -> None:
        # PositionProvider._gen_impl, with the state kept to read its tokens.
        state = PositionProvidingCodegenState(
            default_indent=module.default_indent,
            default_newline=module.default_newline,
            provider=self,
        )
        module._codegen(state)
        self.code = "".join(state.tokens)


def compute(wrapper: MetadataWrapper) -> tuple[Mapping[cst.CSTNode, CodeRange], str]:
    """``wrapper``'s positions, computed now and stored in the wrapper where
    ``resolve(PositionProvider)`` finds them, and its module's code."""
    provider = _CodeAndPositions()
    positions = provider._gen(wrapper)
    wrapper._metadata[PositionProvider] = positions  # type: ignore[attr-defined]
    return positions, provider.code
