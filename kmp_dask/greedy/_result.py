"""Result objects of the greedy drivers."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import cho_solve

from ..expansion import KernelExpansion

__all__ = ["LoopResult", "StopReason", "PursuitResult", "make_result", "merge_repeats", "prefix_coef"]


class StopReason(str, enum.Enum):  # noqa: UP042 (enum.StrEnum would change the members' str() and format())
    """Why a greedy loop ended, for every family (stored as ``stop_reason_`` on estimators and as
    ``stop_reason`` in the CVM, HMP and sparse KPCA results, as its string value)."""

    N_BASIS = "n_basis"  #: the requested number of basis functions was reached
    TOL = "tol"  #: relative training residual norm fell below ``tol``
    EARLY_STOPPING = "early_stopping"  #: validation score stopped improving
    CONVERGED = "converged"  #: no candidate correlates with the residual any more
    LINEAR_DEPENDENCE = "linear_dependence"  #: every tried candidate was dependent on the basis
    EXHAUSTED = "exhausted"  #: no candidate rows left
    NO_USABLE_CANDIDATE = "no_usable_candidate"  #: no basis function: no candidate explains any of the targets
    CONSTANT_KERNEL = "constant_kernel"  #: no basis function: the kernel is numerically constant on the data
    BOUND = "bound"  #: the basis size the generalisation bound chose (KMP, sparse KPCA), after the run
    MAX_TIME = "max_time"  #: KMP: the time budget ``max_time`` ran out (the model is the best held-out size)
    MAX_CORE = "max_core"  #: CVM: the core set reached ``max_core`` rows before the ball converged
    N_COMPONENTS = "n_components"  #: sparse KPCA / KCCA: the requested number of points was chosen
    RANK = "rank"  #: sparse KPCA / KCCA: the kernel matrix's numerical rank was reached
    N_VECTORS = "n_vectors"  #: HMP: the requested number of distinct vectors was selected
    RKHS_TOL = "rkhs_tol"  #: HMP: ``‖w − ŵ‖²`` fell below ``rkhs_tol · ‖w‖²``
    MAX_ITER = "max_iter"  #: HMP without backfitting: the step limit per wanted vector was reached


class LoopResult:
    """The base of every family's result (:class:`PursuitResult`, ``HMPResult``, ``CVMResult``,
    ``KPCAResult``): what a loop's ``result(reason)`` returns once :func:`~kmp_dask.greedy._loop.run_loop`
    has ended it. Each holds ``stop_reason`` (why the loop ended: a :class:`StopReason`, or its
    string value) and ``history`` (one record per iteration, the records the loop's recorder kept
    and handed to the callback); :attr:`reason` reads the first as a :class:`StopReason` whichever
    form it was stored in. The fields are declared by each result's own dataclass (a dataclass
    base would put them first and move every result's positional fields, and the order of the
    state its model files and checkpoints hold)."""

    @property
    def reason(self) -> StopReason:
        """``stop_reason`` as a :class:`StopReason`."""
        return StopReason(self.stop_reason)


@dataclass
class PursuitResult(LoopResult):
    """What a matching-pursuit run returns to its estimator.

    Attributes
    ----------
    basis_indices : ndarray of shape (n,)
        Global row indices of the selected basis rows, in selection order.
    basis_vectors : ndarray of shape (n, d)
    coef : ndarray of shape (n, m)
    intercept : ndarray of shape (m,)
    stop_reason : StopReason
    history : list of dict
        One record per iteration (see :func:`kernel_matching_pursuit`).
    n_train, n_val : int
        Rows used for fitting and for validation.
    basis_kernels : ndarray of shape (n,)
        Index of each basis element's kernel in the dictionary.
    expansion : KernelExpansion
        The fitted model ``Σ_j k_{q_j}(x, z_j) coef_j + intercept``.
    """

    basis_indices: np.ndarray
    basis_vectors: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    stop_reason: StopReason
    history: list = field(default_factory=list)
    n_train: int = 0
    n_val: int = 0
    basis_kernels: np.ndarray | None = None
    expansion: KernelExpansion | None = None
    gram_factor: np.ndarray | None = field(default=None, repr=False)
    ytd: np.ndarray | None = field(default=None, repr=False)
    n_errors0: int | None = None  #: training rows with |y − f| > γ before any atom (bound stopping)
    loop_stop: StopReason | None = None  #: why the loop ended, before a cut back to the best held-out size
    val_sizes: np.ndarray | None = None  #: basis sizes (row atoms) at which the held-out score was measured
    val_scores: np.ndarray | None = None  #: the held-out score at each of ``val_sizes`` (the whole path)
    val_ses: np.ndarray | None = None  #: the standard error of each of ``val_scores`` (the held-out rows' spread)
    _bias_first: bool = field(default=False, repr=False)
    _offset: np.ndarray | None = field(default=None, repr=False)

    @property
    def has_prefix_models(self) -> bool:
        """Whether :meth:`prefix_expansion` is available (squared loss with refits)."""
        return self.gram_factor is not None

    def prefix_expansion(self, k: int) -> KernelExpansion:
        """The least-squares model on the first ``k`` selected atoms (and the intercept column).

        Exact: coefficients from the driver's Cholesky factor of the basis Gram, as the fit
        itself computes them when it has ``k`` atoms. Squared loss, ``backfit``/``prefit`` only.
        """
        k = int(min(max(k, 0), len(self.basis_indices)))
        coef, intercept = self.prefix_parameters(k)
        return KernelExpansion(self.basis_vectors[:k], coef, intercept, self.expansion.kernels,
                               self.basis_kernels[:k], *getattr(self, "input_transform", (None, None)))

    def prefix_parameters(self, k: int):
        """``(coef, intercept)`` of :meth:`prefix_expansion` ``(k)`` (``0 <= k <= n``), without
        building the expansion (the CV's prefix scorers read every size)."""
        if self.gram_factor is None:
            raise ValueError(
                "prefix models need the squared loss with fit_mode='backfit' or 'prefit' "
                "(other modes do not refit earlier coefficients)"
            )
        j = k + int(self._bias_first)
        coef = prefix_coef(self.gram_factor, self.ytd, j)
        intercept = self._offset.copy()
        if self._bias_first:
            intercept += coef[0]
            coef = coef[1:]
        return coef, intercept


def prefix_coef(L, ytd, k: int) -> np.ndarray:
    """Least-squares coefficients of the first ``k`` atoms from the Gram's Cholesky factor ``L``
    (with the ridge) and the rows ``BᵀY``: what the fit itself had at ``k`` atoms."""
    ytd = np.asarray(ytd, dtype=np.float64)
    return cho_solve((L[:k, :k], True), ytd[:k]) if k else ytd[:0]


def merge_repeats(atoms, coef):
    """``atoms`` with repeats (same row and kernel) merged into their first occurrence, whose
    coefficient row becomes the sum of theirs (float64, in selection order); unchanged without repeats."""
    keys = [(a.is_bias, a.index, a.kernel) for a in atoms]
    if len(set(keys)) == len(keys):
        return atoms, coef
    first: dict = {}
    for k, key in enumerate(keys):
        first.setdefault(key, k)
    keep = sorted(set(first.values()))
    merged = np.zeros((len(keep), coef.shape[1]))
    pos = {k: i for i, k in enumerate(keep)}
    for k, key in enumerate(keys):
        merged[pos[first[key]]] += coef[k]
    return [atoms[k] for k in keep], merged


def make_result(atoms, coef, offset, stop, history, *, data, kernels, prefix=(None, None)) -> PursuitResult:
    """Split the constant atom off into the intercept; basis arrays hold real rows only; an atom
    chosen more than once (``fit_mode="basic_reselect"``) is one atom with the summed coefficient.
    ``data``: ``(n_train, n_val, n_features, dtype)`` of the rows fitted; ``prefix``: the Gram factor
    and ``BᵀY`` rows that give every prefix model, or ``(None, None)``."""
    n_train, n_val, n_features, dtype = data
    gram_factor, ytd = prefix
    atoms, coef = merge_repeats(atoms, coef)
    intercept = np.asarray(offset, dtype=np.float64).copy()
    rows = [k for k, a in enumerate(atoms) if not a.is_bias]
    for k, a in enumerate(atoms):
        if a.is_bias:
            intercept += coef[k]
    vectors = np.asarray([atoms[k].z for k in rows], dtype=dtype).reshape(len(rows), n_features)
    which = np.asarray([atoms[k].kernel for k in rows], dtype=np.int64)
    res = PursuitResult(
        basis_indices=np.asarray([atoms[k].index for k in rows], dtype=np.int64),
        basis_vectors=vectors,
        coef=coef[rows],
        intercept=intercept,
        stop_reason=stop,
        history=history,
        n_train=n_train,
        n_val=n_val,
        basis_kernels=which,
        expansion=KernelExpansion(vectors, coef[rows], intercept, tuple(kernels), which),
        gram_factor=None if gram_factor is None else np.array(gram_factor[: len(atoms), : len(atoms)]),
        ytd=None if ytd is None else np.asarray(ytd, dtype=np.float64)[: len(atoms)],
        _bias_first=bool(atoms) and atoms[0].is_bias,
        _offset=np.asarray(offset, dtype=np.float64).copy(),
    )
    return res
