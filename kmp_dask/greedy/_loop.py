"""The loop contract above the engine, and the one runner that drives every loop that meets it.

A family's driver loop is an object with

* ``step(rng) -> StopReason | Iteration | None`` — one iteration: its passes, the stopping rule,
  the choice. A :class:`~kmp_dask.greedy._result.StopReason` ends the loop; an :class:`Iteration`
  says what it admitted (its record, its index ``t``, whether it was the loop's ``last``, the next
  iteration's candidates when they were drawn before the save); None says it admitted nothing (every
  candidate tried was dependent: a *stall*);
* ``stop_on_stall() -> StopReason | None`` — after ``stalls`` consecutive stalls (the runner counts
  them in the loop's ``stalls``, so a checkpoint holds the count), whether the loop ends;
* ``recorder`` — its :class:`~kmp_dask.greedy._record.PathRecorder`;
* ``result(reason)`` — the family's result once the loop ended (its last passes included);
* the state a checkpoint saves is the loop object itself (pickled without its engine, checkpoint
  and callback), restored by unpickling and re-attaching: ``begin`` / ``restore`` stay the
  family's, as what a fresh loop needs first differs between families.

:func:`run_loop` owns what every family did alike: the iteration, the stall count, the order
"record kept → checkpoint saved (its cadence: :meth:`~kmp_dask.greedy._checkpoint.Checkpoint.maybe_save`,
the one signature) → record handed to the callback", so a resumed run's history is an
uninterrupted run's. Sparse KPCA / KCCA (:class:`~kmp_dask.greedy._sparse_kpca.KPCARun`),
hyperplane matching pursuit on an engine (:class:`~kmp_dask.greedy._hmp.HMPLoop`) and in process
(``_DensePursuit``) and KMP (:class:`~kmp_dask.greedy._kmp.Pursuit`: one atom a pass, or
``atoms_per_pass`` atoms a batch as a second kind of step, ``_kmp_blocks.block_step``) and the
CVM / MMDA core-set loop (:class:`~kmp_dask.greedy._cvm._CoreSetLoop`, whose checkpoint state is
``loop.state()``) run on it.
"""

from __future__ import annotations

from typing import NamedTuple

from ._result import StopReason

__all__ = ["Iteration", "run_loop"]


class Iteration(NamedTuple):
    """What a step that admitted something returns to the runner."""

    record: dict
    t: int
    last: bool = False
    cands: object = None
    first: int | None = None


def run_loop(loop, rng, checkpoint=None) -> StopReason:
    """Step ``loop`` until it stops; return why. After each admitted iteration its record is kept,
    ``checkpoint.maybe_save`` is called (when there is a checkpoint), then the callback gets the
    record; after each stall the stall count grows and ``loop.stop_on_stall()`` decides. A step
    whose record is None keeps its own records: KMP's, completed by the next scoring pass (which
    measures the model the iteration made) and handed to the callback there."""
    while True:
        out = loop.step(rng)
        if isinstance(out, StopReason):
            return out
        if out is None:
            loop.stalls += 1
            reason = loop.stop_on_stall()
            if reason is not None:
                return reason
            continue
        loop.stalls = 0
        if out.record is not None:
            loop.recorder.keep(out.record)
        if checkpoint is not None:
            checkpoint.maybe_save(loop, out.t, rng, cands=out.cands, first=out.first, last=out.last)
        if out.record is not None:
            loop.recorder.emit(out.record)
