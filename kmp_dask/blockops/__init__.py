"""Per-partition numerics: NumPy in, small NumPy out. No dask, no validation.

Generic machinery any pursuit composes (:mod:`._state`: views, basis-column cache, residual,
workspace; :mod:`._journal`: effects and the restore journal; :mod:`._engine`: the
:class:`Engine` protocol every driver talks to) and the ops of each family
(:mod:`._kmp`, :mod:`._reduced`). docs/engine.md, "Adding a family", shows how they fit together.
"""

from ._engine import Engine
from ._expansion import predict_block
from ._journal import Effect, Journal, apply_effects
from ._kmp import (
    BIAS_ATOM,
    FACTORED_EXPONENT_MAX_64,
    Atom,
    BlockQuery,
    HeldOutQuery,
    KMPSetup,
    KMPState,
    LineQuery,
    Move,
    RefitQuery,
    ScoreQuery,
    StatsQuery,
    ValQuery,
    accept_column,
    held_out_rows,
    kmp_block_stats,
    kmp_column_stats,
    kmp_effects,
    kmp_gram,
    kmp_init,
    kmp_linesearch,
    kmp_refit_stats,
    kmp_score,
    kmp_stats,
    move_fit,
    pend_column,
    set_coef,
    target_matrix,
)
from ._partition import Partition, PartitionSpec, fetch_rows, partition_bounds, split_mask
from ._reduced import (
    RSScoreQuery,
    RSSetup,
    RSStart,
    RSState,
    RSValuesQuery,
    rs_effects,
    rs_init,
    rs_score,
    rs_start,
    rs_stats,
    rs_values,
)
from ._results import BlockStats, ColumnStats, GramStats, LineStats, PassResult, ScoreStats
from ._state import (
    ColumnCache,
    RecomputedColumns,
    Residual,
    Views,
    Workspace,
    cross64,
    kernel_block,
    split_views,
    sqnorm,
)

__all__ = [
    "Partition", "PartitionSpec", "fetch_rows", "partition_bounds", "split_mask", "predict_block",
    "Effect", "Journal", "apply_effects", "Engine", "PassResult", "ScoreStats", "ColumnStats", "LineStats", "GramStats",
    "Views", "split_views", "ColumnCache", "RecomputedColumns", "Residual", "Workspace", "kernel_block", "cross64",
    "sqnorm",
    "FACTORED_EXPONENT_MAX_64",
    "Atom", "BIAS_ATOM", "KMPSetup", "KMPState", "StatsQuery", "ScoreQuery", "ValQuery", "LineQuery", "RefitQuery",
    "Move", "HeldOutQuery", "held_out_rows", "target_matrix", "kmp_stats", "kmp_init", "pend_column", "accept_column",
    "set_coef", "move_fit",
    "kmp_score", "kmp_column_stats", "kmp_linesearch", "kmp_refit_stats", "kmp_gram", "kmp_effects",
    "BlockQuery", "BlockStats", "kmp_block_stats",
    "RSSetup", "RSStart", "RSScoreQuery", "RSValuesQuery", "RSState", "rs_init", "rs_start", "rs_stats", "rs_score",
    "rs_values", "rs_effects",
]
