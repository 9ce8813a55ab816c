"""One fit / predict skeleton shared by the estimators.

Every estimator of kmp_dask composes a family's loop (``kmp_dask.greedy``) with an engine and
gives back a :class:`~kmp_dask.KernelExpansion`. Its ``fit`` repeats five steps:

1. **validate the parameters** (and, for classifiers, the labels) — before any cluster starts:
   hook ``_check_fit_args(X, y)``;
2. **resolve the input**: numpy / pandas, a dask array or a store (or its path) becomes a store
   (scikit-learn's ``validate_data``, class labels encoded, ``n_features_in_`` /
   ``feature_names_in_`` / ``store_feature_names_`` set), ``sample_weight`` checked, the
   checkpoint opened against the raw data, and the rows standardised inside the model when
   ``standardize`` says so: hook ``_fit_input(X, y)`` (supervised by default, unsupervised for
   the transformers), the rest in :meth:`ExpansionEstimatorMixin._fit_skeleton`;
3. **open an engine session** (``kmp_dask.parallel._session``: ``engine_session`` for one loop
   over the data, ``task_session`` for independent problems) and
4. **run the family's loop** in it — one hook, ``_run_loop(run)``, because a family decides
   which session it needs and what it resolves first (kernels, targets, classes);
5. **finish**: the fitted attributes, the model (``expansion_``), the suspect-result warnings
   (kept in ``fit_warnings_`` by :func:`~._suspect.records_fit_warnings` on ``fit``): hook
   ``_finish_fit(result, run)``, which returns ``self``.

Every ``predict`` / ``decision_function`` / ``transform`` repeats four:

1. **check fitted** (``check_is_fitted`` on ``_fitted_attr``);
2. **check the input** (number of features, DataFrame / store feature names, finite dask
   chunks): hook ``_predict_rows(X)``, :func:`~._inputs.predict_input` by default;
3. **evaluate the expansion(s)** with :meth:`KernelExpansion.decision_function` — the one
   dispatch: numpy in → numpy out, a dask array or a store → a lazy dask array;
4. **labels / values**: :meth:`~ExpansionEstimatorMixin._labels_from_decision` (sign for one
   output, argmax otherwise, lazily for dask) or the values themselves (:func:`squeeze_outputs`).

Where each family plugs in (docs/engine.md, "Estimators"): KMP (``_kmp.py``) and CVM / MMDA
(``_cvm.py``) use every fit step, sparse KPCA (``_kpca.py``) with the unsupervised input;
sparse KCCA (two in-memory views) and the reduced-set compressor (a fitted model and a pool)
have fits of their own and share the checkpoint, the seed and the predict dispatch.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..greedy._checkpoint import open_checkpoint
from ..parallel import map_blocks_rows
from ._inputs import (
    check_weights,
    fit_input,
    is_dask_array,
    is_store_like,
    predict_input,
    weights_digest,
)
from ._scale import standardized_store

__all__ = ["ExpansionEstimatorMixin", "FitRun", "class_codes", "draw_seed", "open_fit_checkpoint",
           "progress_session", "squeeze_outputs", "take_labels"]


@dataclass
class FitRun:
    """What the skeleton resolved for one fit, handed to the family's hooks."""

    in_memory: bool  #: the data are in this process (numpy / pandas input)
    started: float  #: ``time.perf_counter()`` when the fit began (``fit_seconds_``)
    store: object = None  #: the rows the loop sees (the standardised view, or the raw store)
    weights: np.ndarray | None = None  #: checked ``sample_weight`` (None: unweighted)
    checkpoint: object = None  #: the opened checkpoint (None without one)


def draw_seed(random) -> int:
    """One seed for a loop from a ``RandomState`` (``check_random_state(random_state)``, drawn by the
    family in ``_run_loop``: CVM draws one per binary problem once it knows the classes)."""
    return int(random.randint(0, 2**31 - 1))


def open_fit_checkpoint(est, checkpoint, every, resume, store, store_is_input, weights=None, **extra):
    """The fit's checkpoint (None without one), its header holding ``est``'s parameters (and a digest
    of ``weights``, and ``extra``), checked against the data before anything runs (greedy/_checkpoint.py)."""
    params = {**est.get_params(deep=False), **extra}
    if weights is not None:  # a checkpoint resumes only with the same weights
        params["sample_weight"] = weights_digest(weights)
    return open_checkpoint(checkpoint, every=every, resume=resume, estimator=type(est).__name__, params=params,
                           store=store, store_is_input=store_is_input)


@contextlib.contextmanager
def progress_session(progress):
    """Yield ``progress``, the ``(callback, bar)`` of :func:`~._progress.progress_callback` (called by
    the family's module, where tests replace it), and close the bar however the block ends."""
    cb, bar = progress
    try:
        yield cb, bar
    finally:
        if bar is not None:
            bar.close()


def squeeze_outputs(F):
    """Decision values with one output as a 1-D array (scikit-learn's binary shape), else unchanged."""
    return F[:, 0] if F.shape[1] == 1 else F


def class_codes(F):
    """Class index per row of decision values (n, m): the sign of one output, else the argmax."""
    return F[:, 0] > 0 if F.shape[1] == 1 else F.argmax(axis=1)


def take_labels(code, classes):
    """``classes[code]`` (module level: what dask maps over chunks pickles by name)."""
    return classes[np.asarray(code).astype(np.intp)]


class ExpansionEstimatorMixin:
    """The fit template and the predict dispatch of an estimator whose model is ``expansion_``.

    Mixed in before scikit-learn's ``BaseEstimator``; a family overrides the hooks named in the
    module docstring and keeps its own ``fit`` signature (and docstring), calling
    :meth:`_fit_skeleton`. A family that fits through the skeleton defines the two hooks that
    have no default here: ``_run_loop(run)`` (steps 3–4: open its session on ``run.store`` and
    run its loop) and ``_finish_fit(result, run)`` (step 5: set the fitted attributes from that
    result; return ``self``). One with a ``fit`` of its own (the compressor) uses only the
    predict dispatch and the helpers.
    """

    _fitted_attr = "expansion_"  #: the attribute ``check_is_fitted`` looks for before a prediction
    _is_classifier = False  #: supervised input: labels encoded (``classes_``) rather than numeric targets

    # -- fit ---------------------------------------------------------------------------------
    def _fit_skeleton(self, X, y, *, checkpoint=None, checkpoint_every=10, resume=False, sample_weight=None):
        """Steps 1–5 of the module docstring; returns ``self`` (from ``_finish_fit``)."""
        started = time.perf_counter()
        self._check_fit_args(X, y)
        run = FitRun(in_memory=not (is_store_like(X) or is_dask_array(X)), started=started)
        with self._fit_input(X, y) as raw:
            run.weights = check_weights(sample_weight, raw.n_rows)
            run.checkpoint = open_fit_checkpoint(self, checkpoint, checkpoint_every, resume, raw, is_store_like(X),
                                                 run.weights)
            run.store = standardized_store(self, raw, run.weights)  # the fit's rows: (x − mean) / std, or raw
            result = self._run_loop(run)
        return self._finish_fit(result, run)

    def _check_fit_args(self, X, y):
        """Hook, step 1: raise on a bad parameter (or label), naming it — before any cluster starts."""
        self._check_params()

    def _fit_input(self, X, y):
        """Hook, step 2: a context yielding the store of ``X`` (and ``y``); supervised by default."""
        self._input_classes = None
        return fit_input(self, X, y, chunk_rows=self.chunk_rows, is_classifier=self._is_classifier)

    # -- predict -----------------------------------------------------------------------------
    def _predict_rows(self, X):
        """Hook, predict step 2: ``X`` checked against the fit (numpy, or a dask array for dask /
        store input)."""
        return predict_input(self, X)[1]

    def _decision(self, X, expansion=None):
        """The values (n, m) of ``expansion`` (default ``expansion_``) on ``X``: the one predict dispatch."""
        check_is_fitted(self, self._fitted_attr)
        rows = self._predict_rows(X)
        return (self.expansion_ if expansion is None else expansion).decision_function(rows)

    def _labels_from_decision(self, F):
        """Class labels of decision values (n, m): numpy, or lazy for a dask array."""
        code = class_codes(F)
        if is_dask_array(code):  # module-level function + classes array: nothing unpicklable captured
            return map_blocks_rows(take_labels, code, self.classes_, dtype=self.classes_.dtype)
        return take_labels(code, self.classes_)
