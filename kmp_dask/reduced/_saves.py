"""A compression's checkpoint: what is saved when, and the digests its header is checked by.

The checkpoint file itself (header, atomic writes, resume rules) is ``greedy/_checkpoint.py``'s
generic one; here are the compressor's payloads:

* stage ``"pursuit"``, every ``every`` selected vectors and after the last: the pursuit's state
  (``HMPLoop`` on the engine, with the engine's journal; the dense pursuit's state in process),
  the RNG state, ``‖w‖²``, the group of outputs being pursued and the finished groups' results;
* stage ``"path"``, when every pursuit has ended: their results (and the journal, which lets
  exchanges on a store pool run on rebuilt partitions);
* stage ``"tree"``: the chunking tree's vectors and coefficients (kept in later saves);
* the complete checkpoint: :func:`result_payload` (restored by :func:`restored_levels`).
"""

from __future__ import annotations

import hashlib

import numpy as np

from ._level import _Level, levels_from_pursuits, pursuit_history
from ._models import CompressionTarget

__all__ = ["PursuitSaver", "array_digest", "model_digest", "restored_levels", "result_payload"]


def model_digest(target: CompressionTarget) -> str:
    """SHA-256 of the model being compressed (its expansion's vectors, coefficients, intercept and
    kernel; how its outputs are decided): a checkpoint resumes only the compression of that model."""
    exp = target.expansion
    h = hashlib.sha256()
    for a in (exp.support_vectors, exp.coef, exp.intercept):
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    classes = None if target.classes is None else [str(c) for c in np.asarray(target.classes).tolist()]
    h.update(repr(([repr(k) for k in exp.kernels], target.kind, classes, target.pairs, target.source,
                   bool(target.break_ties))).encode())
    return h.hexdigest()


def array_digest(a) -> str | None:
    if a is None:
        return None
    a = np.ascontiguousarray(np.asarray(a))
    if a.dtype.kind in "OUS":
        a = np.asarray([str(v) for v in a.reshape(-1).tolist()]).astype("U")
    return hashlib.sha256(f"{a.dtype.str}{a.shape}".encode() + a.tobytes()).hexdigest()


class PursuitSaver:
    """A compression's saves into its checkpoint (the stages in the module docstring)."""

    def __init__(self, ckpt, extra):
        self.ckpt, self.extra = ckpt, dict(extra)

    def bind(self, *, wsq, group, results, engine=None):
        return _PursuitHook(self, wsq, int(group), list(results), engine)

    def save_path(self, wsq, results, *, dense, engine=None) -> None:
        payload = {**self.extra, "stage": "path", "dense": dense, "wsq": wsq, "results": list(results),
                   "journal": None if engine is None else tuple(engine.journal)}
        self.ckpt.save_payload(payload, iteration=sum(len(r.index) for r in results) - 1, stage="path")


class _PursuitHook:
    """What a pursuit calls at the end of each iteration (the one ``maybe_save`` signature of
    :meth:`~kmp_dask.greedy._checkpoint.Checkpoint.maybe_save`)."""

    def __init__(self, saver, wsq, group, results, engine):
        self.saver, self.wsq, self.group, self.results, self.engine = saver, wsq, group, results, engine
        self.offset = sum(len(r.index) for r in results)

    def maybe_save(self, loop, t: int, rng, *, cands=None, first: int | None = None, last: bool = False) -> None:
        if (t + 1) % self.saver.ckpt.every and not last:
            return
        payload = {**self.saver.extra, "stage": "pursuit", "dense": self.engine is None, "wsq": self.wsq,
                   "group": self.group, "results": self.results, "loop": loop, "rng": rng.bit_generator.state,
                   "journal": None if self.engine is None else tuple(self.engine.journal)}
        self.saver.ckpt.save_payload(payload, iteration=self.offset + int(t), stage="pursuit")


def result_payload(route, levels, wsq, seconds) -> dict:
    """What a complete checkpoint keeps: the path (the pursuits' results, or the levels of the
    dense baselines / the chunking tree), the selection's ``seconds`` and every level exchanged
    during the fit (``route``: the fit's :class:`~kmp_dask.reduced._state.RouteState`)."""
    out = {"wsq": wsq, "seconds": seconds, "stop_reason": route.stop_reason,
           "results": route.results, "levels": None, "exchanged": {}}
    if out["results"] is None:
        out["levels"] = [(lv.index, lv.coef, lv.rkhs_error, lv.vectors) for lv in levels]
    for i, lv in enumerate(levels):
        ex = lv.exchanged
        if ex is not None:
            out["exchanged"][i] = (ex.index, ex.coef, ex.rkhs_error, ex.vectors, int(ex.n_swaps), bool(ex.guarded))
    return out


def restored_levels(route, done, groups, m):
    """The levels of a complete checkpoint, with the exchanges made during its fit (its results, their
    records and the stop reason into ``route``: the resumed fit's ``results_``, ``history_`` and
    ``stop_reason_`` are the uninterrupted fit's)."""
    if done["results"] is not None:
        route.results = list(done["results"])
        route.history = pursuit_history(route.results)
        levels = levels_from_pursuits(route.results, groups, m)
    else:
        levels = [_Level(*t) for t in done["levels"]]
    if done["stop_reason"] is not None:
        route.stop_reason = done["stop_reason"]
    for i, (index, coef, err, vectors, n_swaps, guarded) in done["exchanged"].items():
        levels[int(i)].exchanged = _Level(index, coef, err, vectors, is_exchanged=True, n_swaps=n_swaps,
                                          guarded=guarded)
    return levels, done["wsq"]
