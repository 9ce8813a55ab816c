"""Everything about dask: where partitions live, how passes run, generic task runners, lazy chunk-wise prediction.

No family lives here: a family's loop (kmp_dask.greedy) is handed an engine and a :class:`Tasks`
(a map over independent problems, a tree reduction) by the estimator that composes them.
"""

from ._client import connect, embedded_cluster, resolve_client
from ._engine import ActorEngine, InProcessEngine, PartitionHolder
from ._labels import encode_dask_labels
from ._maprows import map_blocks_rows, map_rows_predict
from ._setup import make_engine, partition_specs
from ._tasks import Tasks, in_process_specs, local_engine

__all__ = [
    "ActorEngine", "InProcessEngine", "PartitionHolder", "connect", "embedded_cluster", "resolve_client",
    "make_engine", "partition_specs", "map_rows_predict", "map_blocks_rows", "encode_dask_labels",
    "Tasks", "in_process_specs", "local_engine",
]
