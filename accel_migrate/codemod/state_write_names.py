"""The names of the in-place tensor methods that write a tensor from their
arguments, without libcst: AM032 (``rules/batch_state_writes``) reads them in
the file it migrates, the project view (``project_state_writes``) in the
classes of a local module; one set, so that the two cannot drift apart."""

from __future__ import annotations

#: In-place tensor methods that write rows picked by an index.
INDEXED_WRITES = frozenset(
    {
        "index_copy_",
        "index_add_",
        "index_put_",
        "index_fill_",
        "scatter_",
        "scatter_add_",
        "scatter_reduce_",
        "masked_scatter_",
    }
)
#: In-place tensor methods that update a whole tensor (or a view of it) from
#: their arguments: a running statistic, an EMA codebook, a copied-in queue.
INPLACE_UPDATES = frozenset(
    {"copy_", "add_", "sub_", "mul_", "div_", "lerp_", "addcmul_", "addcdiv_"}
)
#: Every in-place write of a tensor from the method's arguments.
STATE_WRITES = INDEXED_WRITES | INPLACE_UPDATES
