"""Sparse kernel PCA by matching pursuit: :class:`SparseKernelPCA` (Hussain & Shawe-Taylor §3)."""

from __future__ import annotations

import numbers
import time
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, check_random_state

from ..exceptions import BoundAtCapWarning, DegenerateFitWarning, user_stacklevel
from ..expansion import KernelExpansion
from ..greedy._kpca_config import KPCAConfig
from ..greedy._sampling import resolve_candidates
from ..greedy._sparse_kpca import principal_directions, sparse_kernel_pca
from ..kernels import get_kernel
from ..parallel._session import engine_session
from ._base import ExpansionEstimatorMixin, draw_seed, open_fit_checkpoint, progress_session
from ._inputs import unsupervised_input
from ._progress import progress_callback
from ._scale import check_gamma_value, check_standardize, input_transform, resolve_gamma, standardization
from ._suspect import records_fit_warnings

__all__ = ["SparseKernelPCA", "SparseKCCA"]


def _select(est, store, in_memory, *, kernel, n_components, candidates, seed, desc, unit, columns=(None,),
            checkpoint=None):
    """The greedy selection on an engine over ``store`` (progress shown per ``est.verbose``), its
    :class:`~kmp_dask.greedy._kpca_config.KPCAConfig` built here and handed over whole; a complete
    ``checkpoint`` gives its result without starting a client or an engine."""
    if checkpoint is not None and checkpoint.result is not None:
        return checkpoint.result
    config = KPCAConfig(kernel, store.n_rows, store.n_features, store.dtype, n_components, columns=columns,
                        candidates=candidates, rank_tol=float(est.rank_tol))
    with progress_session(progress_callback(est.verbose, n_components, desc=desc, unit=unit)) as (cb, _), \
            engine_session(est.client, store, in_memory=in_memory) as engine:
        return sparse_kernel_pca(engine, config, random_state=np.random.default_rng(seed), callback=cb,
                                 checkpoint=checkpoint)


def warn_bound_at_cap(owner, cap, param, path):
    """:class:`~kmp_dask.exceptions.BoundAtCapWarning`: the bound's minimum is the last size of a
    path cut at ``cap`` (``param``) while the bound was still falling."""
    warnings.warn(
        f"{owner}: the bound is smallest at the path's last size, {cap} = {param}, and was still falling there "
        f"({path[-2]:.6g} → {path[-1]:.6g}): a longer path may reach a smaller bound, so the chosen size is "
        f"suspect. Raise {param} (e.g. {param}={2 * cap}) and fit again.", BoundAtCapWarning,
        stacklevel=user_stacklevel())


class SparseKernelPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, ExpansionEstimatorMixin, BaseEstimator):
    """Sparse kernel PCA: greedily chosen points, Nyström projection, principal directions.

    Matching pursuit on the kernel matrix (Hussain & Shawe-Taylor §3; Smola & Schölkopf's sparse
    greedy matrix approximation): each step picks the point whose deflated feature-space direction
    carries the most variance, ``argmax_z ‖K̃[:, z]‖² / K̃(z, z)``, and deflates the kernel by it (a
    pivoted partial Cholesky of K, whose columns live with the data partitions on the workers).
    ``transform`` projects ``φ(x)`` onto the span of the chosen points (Nyström) and returns its
    coordinates on the principal directions inside that span, sorted by variance: a kernel
    expansion over the chosen points only. With every point chosen this is kernel PCA.

    Parameters
    ----------
    n_components : int or "bound", default=50
        Points chosen = dimension of the span = components returned. "bound": grow the path to
        ``max_components`` and keep the size where the sample-compression bound (Hussain &
        Shawe-Taylor, Corollary 1: :func:`kmp_dask.bounds.kpca_bound_from_means`) is smallest;
        ``bound_path_`` holds it for every size.
    max_components : int, default=200
        Path length when ``n_components="bound"``. When the bound is smallest at this cap and
        still falling, a :class:`~kmp_dask.exceptions.BoundAtCapWarning` says to raise it.
    bound_delta : float, default=0.05
        The bound's confidence parameter δ.
    kernel : str, default="rbf"
        Kernel name (``"rbf"``, ``"laplacian"``, ``"polynomial"``, ``"sigmoid"``, ``"linear"``).
    gamma : "scale", float or None, default="scale"
        Kernel width (rbf, laplacian) or scale (polynomial, sigmoid): "scale", the default, is
        ``1 / (n_features · Var(X))`` from the training rows, as for :class:`~kmp_dask.KMPRegressor`;
        None: 1 / n_features.
    degree, coef0, kernel_params
        As for :class:`~kmp_dask.KMPRegressor`.
    candidates : "all", "auto" or int, default="all"
        "all" (or None): every point is a candidate at every step (exact; the driver holds the rows —
        small data); "auto": 59 random points per step (the best of them is among the top 5 % with
        probability 0.95); an int: that many.
    rank_tol : float, default=1e-10
        Stop when every point's residual ``K̃(x, x)`` is below ``rank_tol · max k(x, x)`` (the
        kernel matrix's numerical rank is reached): ``stop_reason_ = "rank"`` and a
        :class:`~kmp_dask.exceptions.DegenerateFitWarning` when fewer than ``n_components``.
    random_state, client, verbose, chunk_rows
        As for :class:`~kmp_dask.KMPRegressor`.
    standardize : "auto", bool, default="auto"
        Standardise the features inside the model, as :class:`~kmp_dask.KMPRegressor` does: "auto"
        where ``gamma="scale"`` and the features' scales differ (the rule of the
        :class:`~kmp_dask.exceptions.FeatureScaleWarning`, which it replaces; docs/defaults.md);
        True: always; False: never (the raw rows). The fit reads ``(x − feature_mean_) /
        feature_scale_`` (the store's own mean / std, no extra pass); ``transform`` and saved
        models take raw rows (``expansion_.input_offset`` / ``input_scale``), and
        ``basis_vectors_`` are then standardised rows. ``standardized_`` says what was done.

    Attributes
    ----------
    components_index_ : ndarray (k,) rows chosen, in order
    basis_vectors_ : ndarray (k, n_features) the chosen points
    expansion_ : KernelExpansion — ``transform`` as a kernel expansion over the chosen points
    eigenvalues_ : ndarray (k,) of the centred kernel matrix restricted to the span
        (scikit-learn's ``KernelPCA.eigenvalues_`` when every point is chosen)
    explained_variance_ : ndarray (k,) ``eigenvalues_ / n_samples``
    trace_residual_path_ : ndarray (k + 1,) ``tr(K − K̂_j)`` after j points (j = 0: ``tr K``)
    ``n_components_`` : int; ``stop_reason_`` : str; ``n_passes_`` : int
    history_ : list of dict, one per chosen point: ``iteration``, ``index`` (the row), ``score``
        (the variance along its deflated direction) and ``residual_norm`` (the trace residual after
        it, relative to ``tr K``) — the records ``verbose`` and the CLI's ``--log-json`` show
    """

    def __init__(self, n_components=50, *, kernel="rbf", gamma="scale", degree=3, coef0=1.0, kernel_params=None,
                 candidates="all", rank_tol=1e-10, max_components=200, bound_delta=0.05, random_state=None,
                 client=None, verbose=0, chunk_rows=None, standardize="auto"):
        self.n_components = n_components
        self.max_components = max_components
        self.bound_delta = bound_delta
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.candidates = candidates
        self.rank_tol = rank_tol
        self.random_state = random_state
        self.client = client
        self.verbose = verbose
        self.chunk_rows = chunk_rows
        self.standardize = standardize

    def _check_params(self):
        bound = isinstance(self.n_components, str) and self.n_components == "bound"
        if not bound and not (isinstance(self.n_components, numbers.Integral)
                              and not isinstance(self.n_components, bool) and self.n_components >= 1):
            raise ValueError(f"n_components must be an int >= 1 or 'bound'; got {self.n_components!r}")
        for name in ("max_components",):
            v = getattr(self, name, 1)
            if not (isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 1):
                raise ValueError(f"{name} must be an int >= 1; got {v!r}")
        delta = getattr(self, "bound_delta", 0.05)
        if not (isinstance(delta, numbers.Real) and 0 < delta < 1):
            raise ValueError(f"bound_delta must be a float in (0, 1) (the bound's confidence δ); got {delta!r}")
        resolve_candidates(self.candidates)
        check_standardize(getattr(self, "standardize", "auto"))
        if not (isinstance(self.rank_tol, numbers.Real) and 0 <= self.rank_tol < 1):
            raise ValueError(f"rank_tol must be a float in [0, 1); got {self.rank_tol!r}")
        for name in ("gamma", "gamma_x", "gamma_y"):
            if hasattr(self, name):
                check_gamma_value(getattr(self, name), name)

    @records_fit_warnings
    def fit(self, X, y=None, *, checkpoint=None, checkpoint_every=10, resume=False):
        """Choose the points and the principal directions. ``X``: numpy, dask array or store.

        Parameters
        ----------
        X : array (n, d), dask array, store or path
        y : ignored
        checkpoint : str, path or None
            A directory where the selection's state is saved every ``checkpoint_every`` chosen
            points and when it ends; the final checkpoint is kept. A checkpoint already there is
            never overwritten: pass ``resume=True`` to continue it (after the fit was interrupted
            or its process killed; the model is then identical to an uninterrupted fit's; a
            complete checkpoint gives its model at once), or remove it. The file is a pickle:
            resume only your own checkpoints (docs/engine.md, "Checkpoints").
        checkpoint_every : int, default=10
            Chosen points between two saves.
        resume : bool, default=False
            Continue the checkpoint in ``checkpoint``; with none there, the fit starts from
            scratch. Its parameters and data must be this fit's (checked before it is read).
        """
        return self._fit_skeleton(X, y, checkpoint=checkpoint, checkpoint_every=checkpoint_every, resume=resume)

    def _fit_input(self, X, y):
        return unsupervised_input(self, X, chunk_rows=self.chunk_rows)

    def _run_loop(self, run):
        """The kernel, then the selection (``max_components`` points for the bound rule) on an engine;
        returns its result and the kernel."""
        store = run.store
        seed = draw_seed(check_random_state(self.random_state))
        kernel = get_kernel(self.kernel, gamma=resolve_gamma(self.gamma, store, kernel=self.kernel,
                                                             owner=type(self).__name__),
                            degree=self.degree, coef0=self.coef0,
                            kernel_params=self.kernel_params, n_features=store.n_features)
        s = resolve_candidates(self.candidates)
        if s is not None and s >= store.n_rows:
            s = None
        by_bound = self.n_components == "bound"
        n = min(int(self.max_components if by_bound else self.n_components), store.n_rows)
        res = _select(self, store, run.in_memory, kernel=kernel, n_components=n, candidates=s, seed=seed,
                      desc="sparse kpca", unit="point", checkpoint=run.checkpoint)
        return res, kernel

    def _finish_fit(self, out, run):
        res, kernel = out
        self.fit_seconds_ = time.perf_counter() - run.started  # wall-clock seconds of this call (the report's fit time)
        self.kernel_ = kernel
        by_bound = self.n_components == "bound"
        if by_bound:
            res = self._cut_at_bound_minimum(res)
        self.components_index_ = res.index
        self.basis_vectors_ = res.vectors
        self.trace_residual_path_ = res.trace[:, 0]
        self.stop_reason_ = res.stop_reason
        self.n_passes_ = res.n_passes
        self.history_ = res.history
        self.n_components_ = len(res.index)
        eig, _, coef, offset = principal_directions(res)
        self.eigenvalues_ = eig
        self.explained_variance_ = eig / res.n_rows
        self.expansion_ = KernelExpansion(res.vectors, coef, offset, kernel, None, *input_transform(self))
        self._n_features_out = self.n_components_
        if not by_bound and self.n_components_ < int(self.n_components):
            warnings.warn(
                f"SparseKernelPCA chose {self.n_components_} points, fewer than n_components={self.n_components}: "
                f"stop_reason={self.stop_reason_!r} (every remaining point lies in the span of the chosen ones to "
                f"rank_tol={self.rank_tol}; the kernel matrix has numerical rank {self.n_components_}). "
                "Ask for fewer components, or a narrower kernel (larger gamma).", DegenerateFitWarning,
                stacklevel=user_stacklevel())
        return self

    def _cut_at_bound_minimum(self, res):
        """Corollary 1 along the path: ``B_k`` from the mean residual of the m − k points outside
        the compression set (``tr(K − K̃_k)/(m − k)``; R² = max k(x, x)); keep the k minimising it."""
        from ..bounds import kpca_bound_from_means
        from ..greedy._sparse_kpca import truncate

        m = res.n_rows
        trace = res.trace[:, 0]
        ks = np.arange(len(trace))
        keep = ks < m
        R2 = float(res.dmax[0, 0])
        means = np.clip(trace[keep] / (m - ks[keep]), 0.0, R2)
        self.bound_path_ = kpca_bound_from_means(means, ks[keep], m, np.sqrt(R2), float(self.bound_delta))
        best = int(ks[keep][int(np.argmin(self.bound_path_))])
        cap = int(self.max_components)
        if best == len(res.index) == cap and len(self.bound_path_) > 1 and self.bound_path_[-1] < self.bound_path_[-2]:
            warn_bound_at_cap(type(self).__name__, cap, "max_components", self.bound_path_)
        return truncate(res, best) if best < len(res.index) else res

    def transform(self, X):
        """Coordinates on the principal directions inside the span (n_samples, ``n_components_``);
        numpy in → numpy out, dask array or store in → lazy dask array."""
        return self._decision(X)


def _standardized_view(est, A, gamma, view):
    """SparseKCCA's view ``A`` as its fit reads it: ``(A − mean) / scale`` or ``A`` itself (the
    ``standardize`` rule of :func:`~kmp_dask.estimators._scale.standardization`, on this view and its
    width); sets ``standardized_{view}_`` and, when standardised, ``feature_mean_{view}_`` /
    ``feature_scale_{view}_``."""
    from ..store import InMemoryStore
    from ..store._transform import affine_rows

    for name in (f"feature_mean_{view}_", f"feature_scale_{view}_"):
        est.__dict__.pop(name, None)
    found = standardization(est.standardize, InMemoryStore(A), None, gamma)
    setattr(est, f"standardized_{view}_", found is not None)
    if found is None:
        return A
    setattr(est, f"feature_mean_{view}_", found[0])
    setattr(est, f"feature_scale_{view}_", found[1])
    return affine_rows(A, found[0], found[1])


def _view_transform(est, view):
    """``(offset, scale)`` the fitted view ``view`` applies to raw rows, or ``(None, None)``."""
    if getattr(est, f"standardized_{view}_", False):
        return getattr(est, f"feature_mean_{view}_"), getattr(est, f"feature_scale_{view}_")
    return None, None


class SparseKCCA(BaseEstimator):
    """Sparse kernel CCA by matching pursuit (Hussain & Shawe-Taylor §4).

    Two views of the same rows (``X`` and ``Y``, each with its own kernel). Each step picks the
    row maximising ``ρ_i = (K̃_x K̃_y)_ii / √((K̃_x²)_ii (K̃_y²)_ii)`` — how well the two views' deflated
    kernel columns of that row agree — and deflates both kernels by it (as sparse KPCA does, one
    view each). Standard regularised CCA then runs inside the two k-dimensional sparse subspaces;
    ``transform`` gives the canonical variates of each view as kernel expansions over the chosen
    rows only.

    Parameters
    ----------
    n_components : int, default=20
        Rows chosen (the dimension of each view's subspace); the canonical pairs returned.
    kernel_x, gamma_x, kernel_y, gamma_y
        Each view's kernel and width (gamma "scale", the default: 1 / (that view's n_features ·
        Var(view)); None: 1 / that view's n_features).
    degree, coef0
        As for :class:`~kmp_dask.KMPClassifier` (both views' polynomial and sigmoid kernels).
    reg : float, default=0.1
        CCA regulariser (finite, >= 0), relative to each view's mean variance inside its subspace. Measured
        (benchmarks/sparse_kpca.py, optdigits halves, k = 200): reg = 1e-3 gave held-out
        correlations .55/.57/.76 for the first pairs — §4's quotient is a cosine, so rows isolated
        in both views score 1 and weakly regularised pairs sit on a few of them — while 0.1 gave
        .94/.93/.89, level with Nyström + CCA (.94/.93/.87) and dense KCCA (.94/.95/.90).
    candidates, rank_tol, random_state, client, verbose
        As for :class:`SparseKernelPCA`.
    standardize : "auto", bool, default="auto"
        Standardise each view inside the model, as :class:`SparseKernelPCA` does, decided view by
        view: "auto" where that view's width is "scale" (``gamma_x`` / ``gamma_y``) and its
        features' scales differ (replacing the :class:`~kmp_dask.exceptions.FeatureScaleWarning`);
        True: both views; False: neither. ``transform`` and saved models take raw rows; the
        ``basis_vectors_*`` of a standardised view are standardised rows. ``standardized_x_`` /
        ``standardized_y_`` say what was done, ``feature_mean_x_``, ``feature_scale_x_`` (and
        ``_y_``) hold the transform.

    Attributes
    ----------
    components_index_, basis_vectors_x_, basis_vectors_y_, correlations_ (training canonical
    correlations, decreasing), expansion_x_, expansion_y_ (KernelExpansion each),
    trace_residual_path_ (k + 1, 2), n_components_, stop_reason_, history_ (one record per chosen
    row: ``iteration``, ``index``, ``score`` — §4's quotient). ``bound(X, Y, loss_threshold)``: the
    generalisation bound of §4 (Theorem 4) on the two views' disagreement.
    """

    def __init__(self, n_components=20, *, kernel_x="rbf", gamma_x="scale", kernel_y="rbf", gamma_y="scale", degree=3,
                 coef0=1.0, reg=0.1, candidates="all", rank_tol=1e-10, random_state=None, client=None, verbose=0,
                 standardize="auto"):
        self.n_components = n_components
        self.kernel_x = kernel_x
        self.gamma_x = gamma_x
        self.kernel_y = kernel_y
        self.gamma_y = gamma_y
        self.degree = degree
        self.coef0 = coef0
        self.reg = reg
        self.candidates = candidates
        self.rank_tol = rank_tol
        self.random_state = random_state
        self.client = client
        self.verbose = verbose
        self.standardize = standardize

    @records_fit_warnings
    def fit(self, X, Y, *, checkpoint=None, checkpoint_every=10, resume=False):
        """Choose rows and canonical directions from the paired views ``X`` (n, dx), ``Y`` (n, dy).

        Parameters
        ----------
        X : array (n, dx); Y : array (n, dy) or (n,)
        checkpoint, checkpoint_every, resume
            Checkpoints of the selection (``checkpoint_every``: chosen rows between two saves), as
            for :meth:`SparseKernelPCA.fit`.
        """
        t0 = time.perf_counter()
        if isinstance(self.n_components, str):
            raise ValueError(f"n_components must be an int >= 1 for SparseKCCA; got {self.n_components!r} "
                             "(the bound rule is for SparseKernelPCA and the KMP estimators)")
        SparseKernelPCA._check_params(self)
        if not (isinstance(self.reg, numbers.Real) and not isinstance(self.reg, bool) and np.isfinite(self.reg)
                and self.reg >= 0):
            raise ValueError(
                f"reg must be a finite float >= 0 (the CCA regulariser, relative to each view's mean variance; "
                f"0.1 is the default, 0 none); got {self.reg!r}")
        from sklearn.utils.validation import check_array

        X = check_array(X, dtype=[np.float64, np.float32])
        Y = check_array(Y, dtype=[np.float64, np.float32], ensure_2d=False)
        Y = Y[:, None] if Y.ndim == 1 else Y
        if len(X) != len(Y):
            raise ValueError(f"the two views must have one row per sample each: X has {len(X)} rows, Y has {len(Y)}; "
                             "pass the same samples in the same order")
        self.n_features_in_ = X.shape[1]
        dx, dy = X.shape[1], Y.shape[1]
        X, Y = _standardized_view(self, X, self.gamma_x, "x"), _standardized_view(self, Y, self.gamma_y, "y")
        XY = np.hstack([X, Y.astype(X.dtype, copy=False)])
        kx = get_kernel(self.kernel_x,
                        gamma=resolve_gamma(self.gamma_x, X, kernel=self.kernel_x, owner="SparseKCCA", name="gamma_x"),
                        degree=self.degree, coef0=self.coef0, n_features=dx)
        ky = get_kernel(self.kernel_y,
                        gamma=resolve_gamma(self.gamma_y, Y, kernel=self.kernel_y, owner="SparseKCCA", name="gamma_y"),
                        degree=self.degree, coef0=self.coef0, n_features=dy)
        seed = draw_seed(check_random_state(self.random_state))
        s = resolve_candidates(self.candidates)
        if s is not None and s >= len(XY):
            s = None
        n = min(int(self.n_components), len(XY))
        from ..store import InMemoryStore

        store = InMemoryStore(XY)
        ckpt = open_fit_checkpoint(self, checkpoint, checkpoint_every, resume, store, False)
        res = _select(self, store, True, kernel=(kx, ky), columns=((0, dx), (dx, dx + dy)), n_components=n,
                      candidates=s, seed=seed, desc="sparse kcca", unit="pair", checkpoint=ckpt)
        from ..greedy._sparse_kpca import canonical_directions

        corr, (cx, ox), (cy, oy) = canonical_directions(res, float(self.reg))
        self.components_index_ = res.index
        self.basis_vectors_x_ = res.vectors[:, :dx]
        self.basis_vectors_y_ = res.vectors[:, dx:]
        self.trace_residual_path_ = res.trace
        self.stop_reason_ = res.stop_reason
        self.history_ = res.history
        self.n_components_ = len(res.index)
        self.correlations_ = corr
        self.fit_seconds_ = time.perf_counter() - t0  # wall-clock seconds of this call (the report's fit time)
        self.expansion_x_ = KernelExpansion(self.basis_vectors_x_, cx, ox, kx, None, *_view_transform(self, "x"))
        self.expansion_y_ = KernelExpansion(self.basis_vectors_y_, cy, oy, ky, None, *_view_transform(self, "y"))
        if self.n_components_ < int(self.n_components):
            warnings.warn(
                f"SparseKCCA chose {self.n_components_} rows, fewer than n_components={self.n_components}: "
                f"stop_reason={self.stop_reason_!r} (one view's kernel matrix reached its numerical rank). "
                "Ask for fewer components.", DegenerateFitWarning, stacklevel=user_stacklevel())
        return self

    def transform(self, X, Y=None):
        """Canonical variates of ``X`` (n, ``n_components_``) and, with ``Y``, also of ``Y``."""
        check_is_fitted(self, "expansion_x_")
        Fx = self.expansion_x_.decision_function(np.asarray(X))
        if Y is None:
            return Fx
        Y = np.asarray(Y)
        return Fx, self.expansion_y_.decision_function(Y[:, None] if Y.ndim == 1 else Y)

    def bound(self, X, Y, loss_threshold, *, component=0, delta=0.05):
        """Hussain & Shawe-Taylor's Theorem 4 for canonical pair ``component`` (0 = the most correlated).

        ``X``, ``Y``: the training views passed to ``fit`` (m rows; the points outside the chosen
        rows are the ones counted). Returns :func:`kmp_dask.bounds.kcca_bound`: with probability
        >= 1 − ``delta``, ``Pr{|f_x(x) − f_y(y)| > loss_threshold}`` on a new pair is at most this
        value (the canonical variates have unit training variance; not clipped to 1).
        """
        from ..bounds import kcca_bound

        check_is_fitted(self, "expansion_x_")
        if isinstance(component, bool) or not isinstance(component, numbers.Integral) \
                or not 0 <= component < self.n_components_:
            raise ValueError(f"component must be an int in [0, {self.n_components_}) (a canonical pair); "
                             f"got {component!r}")
        X = np.asarray(X)
        idx = self.components_index_
        if len(X) <= int(idx.max()) or not np.array_equal(self.expansion_x_.transform_input(X[idx]),
                                                          self.basis_vectors_x_):
            raise ValueError(f"X must be the training view passed to fit (its rows {idx[:5].tolist()}... are the "
                             f"chosen ones); got {len(X)} rows that do not hold them: pass the data fitted on")
        Fx, Fy = self.transform(X, Y)
        out = np.ones(len(X), dtype=bool)
        out[idx] = False
        return kcca_bound(Fx[out, component], Fy[out, component], self.n_components_, len(X), loss_threshold,
                          delta)
