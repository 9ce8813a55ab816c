"""Per-partition numerics: NumPy in, small NumPy out. No dask, no validation."""

from ._kmp import (
    kernel_block, kmp_commit, kmp_init, kmp_linesearch, kmp_refit_stats, kmp_restore, kmp_stats, kmp_step,
    sqnorm, target_matrix,
)
from ._partition import Partition, PartitionSpec, fetch_rows, split_mask
from ._expansion import predict_block

__all__ = [
    "Partition", "PartitionSpec", "fetch_rows", "split_mask", "kernel_block", "sqnorm",
    "target_matrix", "kmp_stats", "kmp_init", "kmp_step", "kmp_commit", "kmp_linesearch", "kmp_refit_stats", "kmp_restore", "predict_block",
]
