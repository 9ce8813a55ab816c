"""The one recorder of every family's loop: per-iteration records, per-pass paths and the
callback (no data access).

:class:`PathRecorder` keeps one record per iteration and hands it to the callback; every loop
has one (``loop.recorder``, which :func:`~kmp_dask.greedy._loop.run_loop` keeps and emits
through). KMP's :class:`Recorder` is a PathRecorder whose record is completed later: the scoring
pass of iteration t+1 measures the model that iteration t produced, so its residual norm, loss
and validation score are written into record t before it is emitted; it also keeps the
validation bookkeeping (scores per basis size, early stopping, the best snapshot).
"""

from __future__ import annotations

import numpy as np

__all__ = ["Recorder", "PathRecorder", "patience_atoms"]


class PathRecorder:
    """Per-iteration records and per-pass paths of a loop: sparse KPCA / KCCA, hyperplane matching
    pursuit on an engine or in process, the CVM / MMDA core-set loop, and KMP (:class:`Recorder`).

    ``history``: one dict per iteration, in order; :meth:`record` appends it and hands it to the
    ``callback`` (the estimator's progress bar and the ``--log-json`` listeners,
    :func:`kmp_dask.estimators._progress.progress_callback`); KMP's :class:`Recorder` is one too.
    ``paths``: named lists of per-pass values (the trace residual, the RKHS error, ...), appended
    with :meth:`append` and read back stacked with :meth:`stacked`. A checkpoint pickles it
    without the callback (:meth:`attach` gives it back)."""

    def __init__(self, callback=None, paths=()):
        self.callback = callback
        self.history: list[dict] = []
        self.paths: dict[str, list] = {name: [] for name in paths}

    def attach(self, callback) -> PathRecorder:
        self.callback = callback
        return self

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "callback"}

    def __setstate__(self, state):
        self.__dict__.update(state, callback=None)
        self.__dict__.setdefault("paths", {})  # a KMP Recorder pickled before it was a PathRecorder

    def record(self, rec: dict) -> None:
        """Iteration ``rec["iteration"]`` ended: keep its record and call the callback with it."""
        self.keep(rec)
        self.emit(rec)

    def keep(self, rec: dict) -> None:
        """Keep the record (before a checkpoint is saved, so that the saved history holds it)."""
        self.history.append(rec)

    def emit(self, rec: dict) -> None:
        """Call the callback with a kept record (after the checkpoint, as KMP's loop does)."""
        if self.callback is not None:
            self.callback(rec)

    def append(self, name: str, value) -> None:
        self.paths[name].append(value)

    def path(self, name: str) -> list:
        return self.paths[name]

    def stacked(self, name: str) -> np.ndarray:
        return np.asarray(self.paths[name])


class Recorder(PathRecorder):
    """KMP's recorder: a :class:`PathRecorder` (its ``history``, ``keep`` / ``emit`` and the
    callback, detached from a checkpoint) whose record of iteration t the scoring pass of t + 1
    completes (residual norm, loss, validation score) before it is emitted; with the validation
    scores per basis size, early stopping's patience and the best validated snapshot."""

    def __init__(self, val_query, has_loss: bool, n_iter_no_change, criterion: str = "metric", callback=None):
        super().__init__(callback)
        self.val_query, self.has_loss, self.n_iter_no_change = val_query, has_loss, n_iter_no_change
        #: what ``val_scores`` (the best size, early stopping) measure: "metric" (accuracy for a
        #: classifier, −MSE / −mean loss for a regressor) or "loss" (−MSE on the ±1 targets, or −mean
        #: loss, for a classifier too: a smoother curve than the accuracy of a few held-out rows)
        self.criterion = criterion
        #: with ``criterion="gcv"``: ``(n_train, w_train, p0)`` — the training rows, their summed weight
        #: and the parameters besides the atoms (1 for a fitted mean), for :func:`gcv_score`
        self.gcv = None
        self.val_scores: list[float] = []
        self.val_sizes: list[int] = []
        #: the standard error of each held-out score (the held-out rows' spread; benchmarks read it)
        self.val_ses: list[float] = []
        self._best = None
        self.last_rss = None
        self.n_errors0 = None  #: training errors above the bound's threshold before any atom

    def __setstate__(self, state):
        super().__setstate__(state)  # no callback; a Recorder pickled before it was a PathRecorder
        # a checkpoint written before the standard errors were recorded
        self.__dict__.setdefault("val_ses", [float("nan")] * len(state.get("val_scores", ())))
        self.__dict__.setdefault("gcv", None)  # a checkpoint written before the GCV criterion

    def _scored(self) -> bool:
        """A score per basis size is recorded: held-out rows, or the GCV of the training rows."""
        return self.val_query is not None or getattr(self, "gcv", None) is not None

    def record_pass(self, res, n_atoms: int, coef) -> None:
        """Residual norm and validation score of the current model (``n_atoms`` atoms, ``coef``) from
        the scoring pass's total ``res`` (a :class:`~kmp_dask.blockops.ScoreStats`)."""
        rss = float(res.rss.sum())
        vs = None
        if self.val_query is not None:
            vs, shown, se = self._held_out_score(res)
        if getattr(self, "gcv", None) is not None:  # the size is chosen by GCV on the training rows
            vs, se = gcv_score(rss, n_atoms, *self.gcv), float("nan")
            shown = vs if self.val_query is None else shown
        if vs is not None:
            if self.val_sizes and self.val_sizes[-1] == n_atoms:  # same basis size re-evaluated (refit)
                self.val_scores.pop()
                self.val_sizes.pop()
                self.val_ses.pop()
            if not self.val_scores or vs > max(self.val_scores):
                self._best = (n_atoms, coef.copy())
            self.val_scores.append(vs)
            self.val_sizes.append(n_atoms)
            self.val_ses.append(se)
        if res.n_above is not None:
            n_above = int(res.n_above)
            if self.history:
                self.history[-1]["n_errors"] = n_above
            else:
                self.n_errors0 = n_above
        if self.history:
            self.history[-1]["residual_norm"] = float(np.sqrt(rss))
            self.history[-1]["val_score"] = vs if vs is None else shown
            if self.has_loss:
                self.history[-1]["loss"] = float(res.loss.sum())
        self.last_rss = rss

    def _held_out_score(self, res):
        """``(score deciding the size, the history's val_score, its standard error)`` of the held-out rows."""
        nv = max(res.val_n, 1)
        if self.val_query.metric == "accuracy":
            vs = res.val_correct / nv
        elif not self.has_loss:
            vs = -res.val_sse / nv
        else:
            vs = -res.val_loss / nv
        shown = vs  # the history's val_score: the metric; the growth may be decided by the loss instead
        by_loss = self.val_query.metric != "accuracy" or getattr(self, "criterion", "metric") == "loss"
        if getattr(self, "criterion", "metric") == "loss" and self.val_query.metric == "accuracy":
            vs = -res.val_sse / nv if not self.has_loss else -res.val_loss / nv
        return vs, shown, _standard_error(res, nv, -vs if by_loss else vs, by_loss)

    def no_improvement(self) -> bool:
        """Early stopping: no better validation score for ``n_iter_no_change`` passes — or, when it
        is a pair ``(min_atoms, share)`` (a relative patience, ``n_basis="auto"``), since
        ``max(min_atoms, ⌈share · b⌉)`` atoms, ``b`` the basis size of the best score so far."""
        if not self._scored() or not self.n_iter_no_change or not self.val_scores:
            return False
        best = int(np.argmax(self.val_scores))
        if isinstance(self.n_iter_no_change, tuple):
            return self.val_sizes[-1] - self.val_sizes[best] >= patience_atoms(self.n_iter_no_change,
                                                                               self.val_sizes[best])
        return len(self.val_scores) - 1 - best >= self.n_iter_no_change

    def best_snapshot(self):
        """(basis size, coefficients) with the best validation score, when early stopping is on."""
        if not self._scored() or not self.n_iter_no_change or not self.val_scores:
            return None
        return self._best

    def new_iteration(self, t: int, atom, score: np.ndarray, j: int) -> None:
        """Keep iteration ``t``'s record (``atom`` chosen at position ``j`` of ``score``); the next
        scoring pass completes it and emits it (:meth:`emit_last`)."""
        finite = score[np.isfinite(score)]
        self.keep({
            "iteration": t, "index": atom.index, "kernel": atom.kernel, "score": float(score[j]),
            "best_score": float(finite.max()), "median_score": median(finite),
            "n_candidates": int(len(finite)), "residual_norm": None, "loss": None, "val_score": None, "seconds": 0.0,
        })

    def emit_last(self) -> None:
        """Hand the last record, completed by the scoring pass, to the callback (none before the first atom)."""
        if self.history:
            self.emit(self.history[-1])


def _standard_error(res, nv: float, mean: float, by_loss: bool) -> float:
    """The standard error of a held-out mean: the loss's from its rows' ``Σ ℓ²`` (``val_sq``), the
    accuracy's binomial ``√(p (1 − p) / n)``."""
    if not by_loss:
        return float(np.sqrt(max(mean * (1.0 - mean), 0.0) / nv))
    sq = getattr(res, "val_sq", None)
    if sq is None:
        return 0.0
    return float(np.sqrt(max(sq / nv - mean * mean, 0.0) / nv))


def gcv_score(rss: float, n_atoms: int, n_train: int, w_train: float, p0: int) -> float:
    """−GCV of a least-squares model with ``n_atoms`` basis functions (and ``p0`` more parameters, 1
    for a fitted mean) on ``n_train`` training rows of summed weight ``w_train``:
    ``−(rss / w_train) / (1 − p / n_train)²``, ``p = n_atoms + p0`` (Craven & Wahba's generalised
    cross-validation with the trace of the hat matrix, ``p``; −inf once ``p ≥ n_train``). The
    weighted mean square ``rss / w_train`` does not change when every weight is scaled; the
    degrees of freedom are counted against the rows, not the weights (weights of 3 on every row
    give the unweighted fit's size, not that of the rows repeated three times). Larger is better,
    as for a held-out score."""
    p = int(n_atoms) + int(p0)
    if p >= n_train:
        return float("-inf")
    return -(float(rss) / float(w_train)) / (1.0 - p / float(n_train)) ** 2


def patience_atoms(patience: tuple, best_size: int) -> int:
    """Atoms without a better held-out score after which a relative patience ``(min_atoms, share)``
    stops the pursuit: ``max(min_atoms, ⌈share · best_size⌉)``."""
    min_atoms, share = patience
    return max(int(min_atoms), int(np.ceil(float(share) * int(best_size))))


def median(a: np.ndarray) -> float:
    """``float(np.median(a))`` of a non-empty 1-D array without NaN, the same value (the middle
    order statistic, or the mean of the two middle ones, ``(lo + hi) / 2`` as ``np.mean`` has it),
    without ``np.median``'s generic machinery (0.2 ms per pursuit iteration on small data)."""
    n = len(a)
    h = n // 2
    if n % 2:
        return float(np.partition(a, h)[h])
    p = np.partition(a, (h - 1, h))
    return (float(p[h - 1]) + float(p[h])) / 2.0
