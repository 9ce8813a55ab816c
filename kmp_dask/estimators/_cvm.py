"""Core vector machines and MMDA features: :class:`CVMClassifier`, :class:`MMDA` (Tsang, Kocsor & Kwok)."""

from __future__ import annotations

import numbers
import time

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, check_random_state

from ..expansion import KernelExpansion
from ..greedy._cvm import STAGE_ROWS, sample_size
from ..greedy._cvm_problems import ProblemConfig, fit_binary_problems
from ..greedy._labels import store_labels
from ..greedy._sampling import resolve_candidates
from ..kernels import get_kernel
from ..parallel import map_blocks_rows
from ..parallel._holdout import SplitStore, held_out_rows
from ..parallel._session import engine_session, task_session
from ._base import ExpansionEstimatorMixin, draw_seed, progress_session, squeeze_outputs
from ._calibration import PROBABILITY_HOLDOUT, PlattCalibrator, calibration_fraction, proba_block
from ._inputs import check_class_labels, is_dask_array, is_store_like, sample_rows
from ._progress import inner_progress, progress_callback
from ._scale import check_gamma_value, check_standardize, input_transform, resolve_gamma
from ._suspect import records_fit_warnings

__all__ = ["CVMClassifier", "MMDA"]


class _CVMBase(ExpansionEstimatorMixin, BaseEstimator):
    def __init__(self, *, C=1.0, eps=1e-4, kernel="rbf", gamma="scale", kernel_params=None, candidates=59,
                 max_core=10000, random_state=None, client=None, chunk_rows=None, verbose=0, standardize="auto",
                 stopping="sample"):
        self.C = C
        self.eps = eps
        self.kernel = kernel
        self.gamma = gamma
        self.kernel_params = kernel_params
        self.candidates = candidates
        self.max_core = max_core
        self.random_state = random_state
        self.client = client
        self.chunk_rows = chunk_rows
        self.verbose = verbose
        self.standardize = standardize
        self.stopping = stopping

    def _check_params(self):
        if not (_is_auto(self.C) or (isinstance(self.C, numbers.Real) and not isinstance(self.C, bool) and self.C > 0)):
            raise ValueError(f"C must be 'auto' (n_classes - 1: 1 for two classes) or a float > 0 (the L2-SVM's "
                             f"penalty); got {self.C!r}")
        if not (isinstance(self.eps, numbers.Real) and 0 < self.eps < 1):
            raise ValueError(f"eps must be a float in (0, 1) (the ball's (1+eps) approximation); got {self.eps!r}")
        resolve_candidates(self.candidates)
        if not (isinstance(self.max_core, numbers.Integral) and self.max_core >= 2):
            raise ValueError(f"max_core must be an int >= 2; got {self.max_core!r}")
        if isinstance(self.gamma, (list, tuple)):
            raise ValueError(f"gamma must be 'scale', None (1 / n_features) or a positive number (one kernel); got "
                             f"{self.gamma!r}")
        check_gamma_value(self.gamma)
        check_standardize(self.standardize)
        _certify_rows(self.stopping, self.eps)

    _is_classifier = True  # labels encoded by fit_input; classes_ from them

    @records_fit_warnings
    def fit(self, X, y=None, *, checkpoint=None, checkpoint_every=10, resume=False):
        """Solve the binary problems — one for two classes, one per class against the rest otherwise:
        an L2-SVM each (:class:`CVMClassifier`), or ``n_components`` features each (:class:`MMDA`).

        Parameters
        ----------
        X : array, dask array, DataFrame or store (path / URL / :class:`~kmp_dask.store.Store`)
        y : labels (with array input)
        checkpoint : str, path or None
            A directory where the fit saves its state: the main file ``state.ckpt`` at every
            problem boundary (the finished binary problems' results), and per running problem
            ``problem-<k>.ckpt`` every ``checkpoint_every`` core-set iterations (and, for
            :class:`MMDA`, after each feature). A checkpoint already there is never overwritten:
            pass ``resume=True`` to continue it or remove it. A fit killed at any point and
            resumed gives the identical model to an uninterrupted one; a complete checkpoint
            gives the model at once (docs/cvm.md "Checkpoints"). With a cluster and several
            classes the problems' files are written by the worker tasks: the directory must be
            on a file system the workers share (as the store is).
        checkpoint_every : int, default=10
            Core vectors added between saves of a running problem.
        resume : bool, default=False
            Continue the checkpoint in ``checkpoint`` (with none there the fit starts from
            scratch). Its parameters (but ``client`` and ``verbose``) and data must be this fit's.
        """
        return self._fit_skeleton(X, y, checkpoint=checkpoint, checkpoint_every=checkpoint_every, resume=resume)

    def _check_fit_args(self, X, y):
        self._check_params()
        if y is not None and not (is_store_like(X) or is_dask_array(X)):
            check_class_labels(y)

    def _features_per_problem(self) -> int:
        """MMDA features per binary problem (0: the SVM itself)."""
        return 0

    def _run_loop(self, run):
        """The kernel (checked for a constant k(x, x)), the classes, then the binary problems (resuming
        ``run.checkpoint``); returns their results, the kernel, the class names and the elapsed time of a
        complete checkpoint (None after a run)."""
        store, ckpt = run.store, run.checkpoint
        kernel = get_kernel(self.kernel, gamma=resolve_gamma(self.gamma, store, kernel=self.kernel,
                                                             owner=type(self).__name__),
                            kernel_params=self.kernel_params, n_features=store.n_features)
        kappa = _constant_diagonal(kernel, sample_rows(store))
        codes, names = _classes(self, store)
        if len(codes) < 2:
            raise ValueError(f"{type(self).__name__} needs at least 2 classes in y; got {len(codes)} class "
                             f"({list(names)}). A one-class problem has no margin to find.")
        positives = [codes[1]] if len(codes) == 2 else list(codes)
        self.C_ = resolve_C(self.C, len(codes))
        rs = check_random_state(self.random_state)
        seeds = [draw_seed(rs) for _ in positives]
        store = self._training_rows(store, codes, seeds[0])
        if ckpt is not None and ckpt.result is not None:  # the checkpointed fit had finished
            return ckpt.result, kernel, names, float(ckpt.saved.get("elapsed", 0.0))
        label = list(names) if len(codes) > 2 else [names[1]]
        with progress_session(progress_callback(self.verbose, len(positives), desc=type(self).__name__,
                                                unit="problem")) as (cb, bar), \
                task_session(self.client, in_memory=run.in_memory) as tasks:
            config = ProblemConfig(kernel=kernel, kappa=kappa, C=self.C_, eps=float(self.eps), n_rows=store.n_rows,
                                   candidates=resolve_candidates(self.candidates), max_core=int(self.max_core),
                                   certify_rows=_certify_rows(self.stopping, float(self.eps)),
                                   validate_from=STAGE_ROWS if _is_auto(self.stopping) else None,
                                   n_components=self._features_per_problem())
            results = fit_binary_problems(
                tasks, store, positives, seeds=seeds, config=config, checkpoint=ckpt,
                on_problem=_on_problem(bar, cb, label),
                on_iteration=_on_iteration(bar, self.verbose, label, f"{type(self).__name__} core set"))
        return results, kernel, names, None

    def _training_rows(self, store, codes, seed):
        """Hook: the store the problems are solved on (all rows; CVMClassifier(probability=True) holds some out)."""
        return store

    def _finish_fit(self, out, run):
        """``classes_``, ``kernel_``, ``fit_seconds_``, then the family's model (``_model_from_problems``)."""
        results, kernel, names, elapsed = out
        self.classes_ = np.asarray(names)
        self.kernel_ = kernel
        ckpt = run.checkpoint
        saved_elapsed = 0.0 if ckpt is None or ckpt.saved is None else float(ckpt.saved.get("elapsed", 0.0))
        self.fit_seconds_ = elapsed if elapsed is not None else saved_elapsed + time.perf_counter() - run.started
        self._model_from_problems(results)
        return self


def _certify_rows(stopping, eps):
    """``stopping`` as the core-set loop takes it (``certify_rows``): "paper" None (every row
    certified), "sample" and "auto" :func:`~kmp_dask.greedy._cvm.sample_size` (⌈10 / eps⌉; "auto"
    grows its samples up to it, validated: ``validate_from``), an int ≥ 100 itself."""
    if isinstance(stopping, str) and stopping in ("paper", "sample", "auto"):
        return None if stopping == "paper" else sample_size(eps)
    if isinstance(stopping, numbers.Integral) and not isinstance(stopping, bool) and stopping >= 100:
        return int(stopping)
    raise ValueError(f"stopping must be 'auto' (samples doubling from {STAGE_ROWS} rows up to ⌈10 / eps⌉, the "
                     f"size chosen on held-out rows), 'sample' (the loop on a random sample of ⌈10 / eps⌉ rows: "
                     f"{sample_size(eps)} at eps={eps!r}), 'paper' (every row certified, as Tsang et al.) or an "
                     f"int >= 100 (the sample's rows); got {stopping!r}")


def _is_auto(value) -> bool:
    return isinstance(value, str) and value == "auto"


def resolve_C(C, n_classes: int) -> float:
    """The L2-SVM's penalty a fit uses: ``C`` itself, or for ``"auto"`` ``max(1, n_classes − 1)``.

    One-vs-rest gives each class's problem about ``n / n_classes`` positive rows against
    ``n (n_classes − 1) / n_classes`` negative ones; at ``C = n_classes − 1`` the positives' squared
    slacks weigh in total what the negatives' weigh at ``C = 1`` (two classes: ``C = 1``, the paper's
    value). Measured on tuning sets: docs/cvm.md "Default C"."""
    return max(1.0, n_classes - 1.0) if _is_auto(C) else float(C)


def _on_problem(bar, cb, label):
    """The callback of a finished binary problem: the bar moved past the problems a resumed fit found
    finished, and the problem's record to ``cb``."""
    shown = [0]

    def on_problem(k, result, n_done):
        if bar is not None and hasattr(bar, "update") and n_done - 1 > shown[0]:
            bar.update(n_done - 1 - shown[0])  # the problems a resumed fit found finished
        shown[0] = n_done
        if cb is not None:
            cb(_problem_record(k, label[k], result, n_done))

    return on_problem


def _on_iteration(bar, verbose, label, desc):
    """The core-set iterations' progress (:func:`~._progress.inner_progress`), records with the problem."""
    inner = inner_progress(bar, verbose, desc)
    if inner is None:
        return None
    return lambda k, rec: inner({**rec, "problem": int(k), "class": getattr(label[k], "item", lambda: label[k])()})


def _problem_record(k, name, result, n_done) -> dict:
    """The progress record of binary problem ``k`` (class ``name`` against the rest) once it is done."""
    runs = [result] if hasattr(result, "core_index") else [r for r, _ in result]
    return {"iteration": n_done - 1, "problem": int(k), "class": name.item() if hasattr(name, "item") else name,
            "n_core": int(sum(len(r.core_index) for r in runs)), "n_iter": int(sum(r.n_iter for r in runs)),
            "problem_seconds": float(sum(r.seconds for r in runs))}


def _constant_diagonal(kernel, sample) -> float:
    """κ = k(x, x), which the minimum-enclosing-ball view needs to be the same for every x."""
    probe = sample if sample is not None and len(sample) else np.zeros((1, 1))
    d = np.asarray(kernel.diag(probe), dtype=np.float64)
    if not np.allclose(d, d[0], rtol=1e-9, atol=0):
        raise ValueError(
            f"kernel={kernel!r} has k(x, x) varying from {d.min():.4g} to {d.max():.4g}; core vector machines need a "
            "kernel with constant k(x, x) (the minimum enclosing ball view of the SVM): use 'rbf' or 'laplacian'")
    return float(d[0])


def _classes(est, store):
    if est._input_classes is not None:
        return np.arange(len(est._input_classes)), est._input_classes
    names = store.attrs.get("classes")
    with engine_session("sync", store, in_memory=True) as engine:  # the labels are read in this process
        codes = store_labels(engine)
    if names is not None:
        return codes, np.asarray(names)[codes.astype(int)]
    return codes, codes


class CVMClassifier(ClassifierMixin, _CVMBase):
    """L2-SVM by core vector machine (Tsang, Kwok & Cheung), one-vs-rest for several classes.

    The SVM with squared slacks is a minimum enclosing ball in the feature space of
    ``k̃ = y_i y_j (k + 1) + δ_ij / C``; the core-set loop finds a (1+eps)-approximate ball from a
    small core set, measuring distances with data passes on the engine (the furthest of
    ``candidates`` random rows per iteration, a full pass before declaring convergence). The
    MEB dual on the core set is a small QP solved on the driver (active-set, warm-started).

    Parameters
    ----------
    C : "auto" or float, default="auto"
        Penalty on the squared slacks. ``"auto"``: ``n_classes − 1`` — 1 for two classes (the
        paper's value), and for one-vs-rest the ratio of negative to positive rows of a problem
        when the classes are balanced, which a fixed ``C = 1`` leaves underweighted on the
        positive side (docs/cvm.md "Default C"; the value used is ``C_``; ``C=1.0`` is the
        previous default). Every row inside the margin (every training error among them) is a
        core vector, so on noisy, overlapping classes most rows are (2,000 rows of a 3-class set
        with 10 % flipped labels: 64–67 % per problem at ``C=1``, 31–32 % at ``C=10``). A larger
        ``C`` is sparser; whether it is more accurate depends on the data (docs/cvm.md "How many
        vectors on noisy data": choose it by cross-validation, e.g.
        ``GridSearchCV(CVMClassifier(), {"C": [1, 10, 100]})``).
    eps : float, default=1e-4
        Every training point ends within (1+eps)·R of the ball's centre (checked by a full pass).
        Measured (docs/cvm.md): the paper's 1e-3 left banana at 0.822 test accuracy against
        SVC's 0.900; 1e-4 reached 0.8995 (452 core vectors, 4.5 s for 2,000 rows). At a fixed
        eps the core set stays about the same size whatever N (linear time), and on data with
        label noise held-out accuracy then falls as N grows past ~10⁵ rows; a smaller eps restores
        it at superlinear cost (benchmarks/notes/cvm_measurements.md, "Growth with N").
    kernel : "rbf" or "laplacian"; kernel_params
        A kernel with constant k(x, x) (the ball view needs it).
    gamma : "scale", float or None, default="scale"
        One kernel width (no list): ``"scale"`` is ``1 / (n_features · Var(X))`` from the training
        rows, as for :class:`~kmp_dask.KMPClassifier`; None: ``1 / n_features``; or a positive number.
    standardize : "auto", bool, default="auto"
        Standardise the features inside the model, as :class:`~kmp_dask.KMPClassifier` does:
        ``"auto"`` when ``gamma="scale"`` and the features are on very different scales, True
        always, False never.
        ``standardized_``, ``feature_mean_``, ``feature_scale_`` say what the fit did; the
        model (``expansion_``) takes raw rows.
    candidates : "all", "auto" or int, default=59
        Rows measured per iteration: "all" (or None) every row — no probabilistic speed-up;
        "auto" 59 (= ⌈log 0.05 / log 0.95⌉, the same words as every estimator's); an int that many.
    max_core : int, default=10000
        Most core vectors per binary problem: its fit stops there (``stop_reason_`` "max_core").
    stopping : "auto", "sample", "paper" or int, default="auto"
        The rows the core-set loop runs on and certifies (every one within (1+eps)·R). "paper":
        every training row, Tsang et al.'s rule; "sample": a random sample of ⌈10 / eps⌉ rows
        (100,000 at the default eps) when there are more, else every row (the paper's loop, the
        same model); an int: a sample of that many rows. On data with label noise the paper's
        rule makes held-out accuracy fall as N grows past a number of rows that depends on the
        noise (~2·10⁴ at 3 % flipped labels, ~10⁵ at 1 %, at eps 1e-4). "auto" chooses the
        sample's size on the data: the loop runs on nested random samples doubling from 5,000
        rows up to the "sample" rule's, each warm-started from the last, counts the model's
        errors on the rows the next sample adds, and stops growing when they rise (the model of
        the best sample is returned; ``results_[k].validation`` and ``.sample_rows`` say what
        it measured and chose). Below 10,000 rows it is the paper's loop, the same model
        (docs/cvm.md "Validated growth").
    random_state, client, chunk_rows
        As for :class:`~kmp_dask.KMPClassifier`. With a cluster, a binary problem runs its passes
        on the workers; the binary problems of a multi-class fit run as parallel tasks.
    verbose : int, default=0
        Progress per binary problem (one per class for several classes): 1 a progress bar,
        ``k ≥ 2`` a line on stderr every ``k`` problems (class, core vectors, time); listeners
        (the CLI's ``--log-json``) get every problem's record.
    probability : bool, default=False
        Give ``predict_proba``, as ``SVC(probability=True)``: 10 % of the rows are held out by a
        hash of the row index (``PROBABILITY_HOLDOUT``, as KMPClassifier does; the problems are
        solved on the other 90 %), and the decision values of (up to ``CALIBRATION_ROWS`` of)
        them fit ``calibrator_``, a multinomial logistic regression on the decision values
        (Platt's sigmoid for two classes). False: all rows, and the model of earlier versions.

    Attributes
    ----------
    classes_, C_ (the penalty used: ``C``, or what ``"auto"`` resolved to), core_indices_ (array,
    or list per class), dual_coef_ (α·y per core vector, same shape), intercept_ (per problem),
    radius_ (R per problem), n_iter_ (per problem), expansion_ (KernelExpansion over the union of
    core vectors; one output, or one per class), n_full_passes_, stop_reason_, fit_seconds_
    (wall-clock seconds of the fit; a resumed fit adds the time its checkpoint recorded up to the
    last problem boundary), results_ (one
    ``CVMResult`` per problem, with its own ``seconds`` and ``history``: one record per core-set
    iteration, the records ``verbose`` and ``--log-json`` are given).
    """

    def __init__(self, *, C="auto", eps=1e-4, kernel="rbf", gamma="scale", kernel_params=None, candidates=59,
                 max_core=10000, random_state=None, client=None, chunk_rows=None, verbose=0, standardize="auto",
                 stopping="auto", probability=False):
        super().__init__(C=C, eps=eps, kernel=kernel, gamma=gamma, kernel_params=kernel_params,
                         candidates=candidates, max_core=max_core, random_state=random_state, client=client,
                         chunk_rows=chunk_rows, verbose=verbose, standardize=standardize, stopping=stopping)
        self.probability = probability

    def _check_params(self):
        super()._check_params()
        if not isinstance(self.probability, (bool, np.bool_)):
            raise ValueError(f"probability must be True or False; got {self.probability!r}")

    def _training_rows(self, store, codes, seed):
        """``probability=True``: the rows a hash split (:data:`PROBABILITY_HOLDOUT`, seeded by the first
        problem's seed) does not hold out; the held-out ones calibrate (:func:`calibrate_cvm`)."""
        self._held = None
        if not self.probability:
            return store
        view = SplitStore(store, PROBABILITY_HOLDOUT, seed)
        self._held = (store, view, np.asarray(codes), seed)
        return view

    def _finish_fit(self, out, run):
        super()._finish_fit(out, run)
        calibrate_cvm(self, self.__dict__.pop("_held", None))
        return self

    def _has_proba(self):
        return getattr(self, "calibrator_", None) is not None or (
            not hasattr(self, "expansion_") and bool(self.probability))

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Class probabilities (n, n_classes) (``probability=True``): the decision values mapped by
        ``calibrator_``, fitted on the rows the fit held out (lazy for dask / store input)."""
        check_is_fitted(self, "calibrator_")
        F = self._decision(X)
        if is_dask_array(F):
            return map_blocks_rows(proba_block, F, self.calibrator_, dtype=np.float64, n_cols=len(self.classes_))
        return self.calibrator_.predict_proba(F)

    def _model_from_problems(self, results):
        """One L2-SVM per problem: ``expansion_`` over the union of their core vectors, one output each."""
        union, pos = [], {}
        for r in results:
            for g, row in zip(r.core_index.tolist(), r.core_rows, strict=True):
                if g not in pos:
                    pos[g] = len(union)
                    union.append(row)
        coef = np.zeros((len(union), len(results)))
        for j, r in enumerate(results):
            coef[[pos[g] for g in r.core_index.tolist()], j] = r.a
        intercept = np.array([r.intercept for r in results])
        self.expansion_ = KernelExpansion(np.asarray(union), coef, intercept, self.kernel_, None,
                                          *input_transform(self))
        one = len(results) == 1
        self.core_indices_ = results[0].core_index if one else [r.core_index for r in results]
        self.dual_coef_ = results[0].a if one else [r.a for r in results]
        self.intercept_ = intercept
        self.radius_ = np.sqrt(np.array([r.R2 for r in results]))
        self.n_iter_ = np.array([r.n_iter for r in results])
        self.n_full_passes_ = np.array([r.n_full_passes for r in results])
        self.stop_reason_ = [r.stop_reason for r in results]
        self.results_ = results

    def decision_function(self, X):
        """Decision values: (n,) for two classes, (n, n_classes) otherwise (lazy for dask / store input)."""
        return squeeze_outputs(self._decision(X))

    def predict(self, X):
        """Predicted class labels (numpy, also for dask / store input)."""
        F = self._decision(X)
        if not isinstance(F, np.ndarray):
            from ..parallel._waits import compute_bounded

            (F,) = compute_bounded(F, what="decision pass")
        return self._labels_from_decision(F)


def calibrate_cvm(est, held) -> None:
    """``calibrator_`` of a fitted CVMClassifier from ``held`` = (the fit's full store, the view it
    was solved on, class codes, seed) — None without ``probability`` — and its ``core_indices_`` as
    rows of the full store."""
    est.calibrator_ = None
    if held is None:
        return
    full, view, codes, seed = held
    est.core_indices_ = (view.base_index(est.core_indices_) if len(est.classes_) == 2
                         else [view.base_index(c) for c in est.core_indices_])
    X, y = held_out_rows(full, calibration_fraction(PROBABILITY_HOLDOUT, full.n_rows), seed)
    F = est.expansion_.without_input_transform().decision_function(X)  # X: the fit's (standardised) rows
    # a CVM's decision values are small (~1e-3: the ball's scale), and the logistic fit's L2 term
    # would flatten them: fit on values of unit RMS and fold that scale into the map
    unit = 1.0 / max(float(np.sqrt(np.mean(np.square(F)))), np.finfo(np.float64).tiny)
    est.calibrator_ = PlattCalibrator.fit(F * unit, np.searchsorted(codes, np.asarray(y)), len(est.classes_))
    est.calibrator_.coef = est.calibrator_.coef * unit


class MMDA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, _CVMBase):
    """Maximum margin discriminant analysis features by core vector machines (Tsang, Kocsor & Kwok).

    Feature q+1 of a binary problem is the L2-SVM direction orthogonal (in feature space) to the
    q found so far: the CVM run with the kernel deflated by them (the partitions keep their rows'
    projections on the earlier features), ``u_{q+1} = w/‖w‖``. Multi-class: one-vs-rest, the
    features of all binary problems concatenated. ``transform`` is a kernel expansion over the
    union of core vectors.

    Parameters
    ----------
    n_components : int, default=3
        Features per binary problem (the paper found 3–5 per class best).
    C : "auto" or float, default=1.0
        Penalty on the squared slacks of each binary problem. The default stays the paper's 1.0
        (MMDA's features were not measured against other values); ``"auto"`` is
        ``n_classes − 1``, as in :class:`CVMClassifier`; ``C_`` is the value used.
    eps, kernel, gamma, kernel_params, candidates, max_core, random_state, client, chunk_rows, verbose, standardize
        As for :class:`CVMClassifier`.
    stopping : "auto", "sample", "paper" or int, default="sample"
        The rows each feature's core-set loop runs on and certifies, the values meaning what they
        mean for :class:`CVMClassifier` (each feature's loop draws its own sample from the
        feature's random stream). The default stays "sample": with "auto", the validated growth,
        a linear classifier on the features lost 0.5 points at 5·10⁴ rows and gained nothing at
        4·10⁵ (docs/cvm.md "Validated growth").

    Attributes
    ----------
    classes_, expansion_ (KernelExpansion, one output per feature), n_features_out_,
    components_per_problem_ (list), kernel_evaluations_per_feature_ (distinct vectors of the
    whole expansion ÷ features: what ``transform`` costs per feature, the vectors being shared),
    vectors_per_feature_ (each feature's own expansion size, as the paper's Table 6 counts it:
    it grows with the feature's index, each feature carrying the earlier ones' core vectors),
    core_sizes_ (core vectors of each feature's CVM), training_kernel_evaluations_ (kernel values
    the fit computed: distance passes and core Gram rows; values read from the partitions' column
    cache are not counted; a resumed fit counts the columns it rebuilt), fit_seconds_ (as for
    :class:`CVMClassifier`).
    """

    def __init__(self, n_components=3, *, C=1.0, eps=1e-4, kernel="rbf", gamma="scale", kernel_params=None,
                 candidates=59, max_core=10000, random_state=None, client=None, chunk_rows=None, verbose=0,
                 standardize="auto", stopping="sample"):
        super().__init__(C=C, eps=eps, kernel=kernel, gamma=gamma, kernel_params=kernel_params,
                         candidates=candidates, max_core=max_core, random_state=random_state, client=client,
                         chunk_rows=chunk_rows, verbose=verbose, standardize=standardize, stopping=stopping)
        self.n_components = n_components

    def _check_fit_args(self, X, y):
        if not (isinstance(self.n_components, numbers.Integral) and not isinstance(self.n_components, bool)
                and self.n_components >= 1):
            raise ValueError(f"n_components must be an int >= 1 (features per binary problem); "
                             f"got {self.n_components!r}")
        super()._check_fit_args(X, y)

    def _features_per_problem(self) -> int:
        return int(self.n_components)

    def _model_from_problems(self, problems):
        """The features of every problem: ``expansion_`` over the union of their core vectors, one
        output per feature (each minus its parts along the problem's earlier features)."""
        union, pos, columns = [], {}, []
        for features in problems:
            prev = []  # this problem's earlier features, as coefficient vectors over the union
            for res, (S, a, PSa, norm) in features:
                c = {}
                for g, row, w in zip(res.core_index.tolist(), S, a, strict=True):
                    if g not in pos:
                        pos[g] = len(union)
                        union.append(row)
                    c[pos[g]] = c.get(pos[g], 0.0) + w / norm
                for q, cq in enumerate(prev):  # minus the parts along the earlier features
                    for i, v in cq.items():
                        c[i] = c.get(i, 0.0) - PSa[q] / norm * v
                prev.append(c)
                columns.append(c)
        coef = np.zeros((len(union), len(columns)))
        for j, c in enumerate(columns):
            for i, v in c.items():
                coef[i, j] = v
        self.expansion_ = KernelExpansion(np.asarray(union), coef, 0.0, self.kernel_, None, *input_transform(self))
        self.components_per_problem_ = [len(f) for f in problems]
        self.core_sizes_ = [len(res.core_index) for f in problems for res, _ in f]
        self.n_features_out_ = self._n_features_out = len(columns)
        self.kernel_evaluations_per_feature_ = len(union) / max(len(columns), 1)
        self.vectors_per_feature_ = np.count_nonzero(coef, axis=0)
        self.training_kernel_evaluations_ = int(sum(res.kernel_evaluations for f in problems for res, _ in f))

    def transform(self, X):
        """Features ``u_qᵀφ(x)`` (n_samples, ``n_features_out_``); numpy or lazy dask for dask/store input."""
        return self._decision(X)
