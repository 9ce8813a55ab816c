"""The engine protocol: what every driver in ``kmp_dask.greedy`` may ask of the partitions.

An *engine* owns the row partitions of one data set and runs *passes* over them. It is declared
here, beside the effects and the journal it is defined by, so the drivers (which import no dask)
can name the type; the implementations live in :mod:`kmp_dask.parallel`
(:class:`~kmp_dask.parallel.InProcessEngine`, :class:`~kmp_dask.parallel.ActorEngine`).

Drivers only ever call :meth:`Engine.run` and read :attr:`Engine.journal` (a checkpoint saves
it); whoever opened the engine closes it. Engines may offer more — ``free_state_bytes()``
(memory left for partition state, probed with ``getattr`` by
:func:`~kmp_dask.greedy._kmp.resolve_basis_columns`), ``n_calls`` (passes run, asserted by
the pass-count tests), ``n_partitions`` — which the protocol does not require.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

from ._journal import Effect, Journal

__all__ = ["Engine"]


@runtime_checkable
class Engine(Protocol):
    """Row partitions and one operation on them: a pass.

    ``run(op, msg, effects)`` applies the state-changing ``effects`` in order on every partition,
    then the query ``op(partition, msg)`` (None: effects only), and returns the query results *in
    partition order* — the order every driver sums them in, so a fit is bit-for-bit the same
    whatever the number of workers. Every effect sent is recorded in ``journal`` before it runs,
    so a partition lost with its worker is rebuilt by replaying it.
    """

    journal: Journal

    def run(self, op: Callable[[Any, Any], Any] | None, msg: Any = None, effects: Iterable[Effect] = ()) -> list:
        """One pass: ``effects`` then ``op(partition, msg)`` on every partition; the results in partition order."""
        ...

    def close(self) -> None:
        """Release the partitions (and the workers' holders)."""
        ...
