"""Per-partition numerics of kernel matching pursuit (NumPy in, small NumPy out).

Each function here is an *operation* ``op(part, msg) -> dict`` that the engine runs on every
partition, wherever the partition lives. Messages are small (candidate rows, one basis row,
coefficients); results are small reductions that the driver sums in partition order.

State kept in ``part.state`` (all rebuildable from data + driver state, see :func:`kmp_restore`):

``kernels``       the dictionary's kernels (a candidate is a (row, kernel) pair)
``loss``          None for the squared loss (exact least-squares path), else a
                  :class:`~kmp_dask.losses.Loss`
``Xtr, Xva``      training / validation rows of the partition (the split is a hash of the
                  global row index, :func:`~kmp_dask.blockops._partition.split_mask`)
``sq_tr, sq_va``  their squared row norms (cached for the RBF kernel)
``Ytr, Yva``      targets, float64 (rows, m); minus the intercept offset for the squared loss
``Btr, Bva``      cached basis columns ``k(X, z_j)`` (a column of ones for the bias atom),
                  capacity grown by doubling
``n``             number of accepted basis columns
``F``             training function values ``Btr[:, :n] @ coef`` (other losses)
``R``             the pursuit's residual: ``Ytr − F`` (squared) or ``−∂L/∂f`` at F (other losses)
``pending``       the last committed column pair, appended when the driver accepts it

Residual and score, per DESIGN.md §2: for candidate columns ``d_k`` the pass returns ``d_kᵀR``
(s·K, m), ``‖d_k‖²`` (s·K,) and, for pre-fitting, ``d_kᵀB`` (s·K, n); candidates are ordered
kernel-major (all s rows for kernel 0, then for kernel 1, ...).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.blas import dsyrk as _dsyrk

from ..kernels import rbf, rbf_multi
from ._partition import Partition, fetch_rows, split_mask

__all__ = [
    "target_matrix",
    "kmp_stats",
    "kmp_init",
    "kmp_step",
    "kmp_commit",
    "kmp_linesearch",
    "kmp_refit_stats",
    "kmp_restore",
    "kernel_block",
]

#: Upper bound on the number of kernel values held at once per partition (row blocking).
BLOCK_ELEMENTS = 1 << 22


def kernel_block(kernel, X, X_sq, Z, Z_sq, out=None):
    """``kernel(X, Z)`` using cached squared norms where the kernel can use them.

    ``out`` (RBF only, a C-contiguous buffer of the result's shape and dtype) lets the hot loop
    reuse one buffer instead of allocating a fresh block every pass (see kernels/_rbf.py on why
    large temporaries are expensive inside dask workers).
    """
    if out is not None and getattr(kernel, "name", None) == "rbf" and out.dtype == np.result_type(X, Z):
        return rbf(X, Z, gamma=kernel.get("gamma"), X_sqnorm=X_sq, Y_sqnorm=Z_sq, out=out)
    if getattr(kernel, "needs_sqnorm", False):
        return kernel(X, Z, X_sqnorm=X_sq, Y_sqnorm=Z_sq)
    return kernel(X, Z)


def sqnorm(X: np.ndarray) -> np.ndarray:
    """Squared Euclidean norm of each row, in the dtype of ``X``."""
    return np.einsum("ij,ij->i", X, X)


def target_matrix(y: np.ndarray, spec: dict) -> np.ndarray:
    """Turn raw labels/targets into the float64 target matrix the pursuit fits.

    ``spec["kind"] == "ovr"``: one-vs-rest ±1 columns for ``spec["classes"]`` (a single column,
    positive for ``classes[1]``, in the binary case). ``"regression"``: ``y`` as float64 (n, m).
    """
    if spec["kind"] == "ovr":
        classes = np.asarray(spec["classes"])
        yy = np.asarray(y).reshape(-1)
        if len(classes) == 2:
            return np.where(yy == classes[1], 1.0, -1.0)[:, None]
        return np.where(yy[:, None] == classes[None, :], 1.0, -1.0)
    Y = np.asarray(y, dtype=np.float64)
    return Y[:, None] if Y.ndim == 1 else Y


def _val_mask(part: Partition, msg: dict) -> np.ndarray:
    gidx = np.arange(part.start, part.stop, dtype=np.int64)
    return split_mask(gidx, msg.get("validation_fraction", 0.0), msg.get("split_seed", 0))


def kmp_stats(part: Partition, msg: dict) -> dict:
    """Sums needed before the pursuit starts: target sums over training rows, label set."""
    val = _val_mask(part, msg)
    out = {"n_train": int((~val).sum()), "n_val": int(val.sum())}
    if msg.get("unique_labels"):
        out["labels"] = np.unique(np.asarray(part.y).reshape(-1))
        return out
    Y = target_matrix(part.y[~val], msg["targets"])
    out["y_sum"] = Y.sum(axis=0)
    out["y_sqsum"] = np.einsum("ij,ij->j", Y, Y)
    return out


def kmp_init(part: Partition, msg: dict) -> dict:
    """Split the partition, build targets and empty basis caches; fetch the first candidates."""
    val = _val_mask(part, msg)
    X = part.X
    st = part.state
    st.clear()
    st["kernels"] = list(msg["kernels"])
    st["loss"] = msg.get("loss")
    if val.any():
        st["Xtr"], st["Xva"] = X[~val], X[val]
    else:  # no validation rows: views, not copies (the partition's largest array)
        st["Xtr"], st["Xva"] = X, X[:0]
    st["sq_tr"], st["sq_va"] = sqnorm(st["Xtr"]), sqnorm(st["Xva"])
    Y = target_matrix(part.y, msg["targets"])
    if st["loss"] is not None:
        Y = st["loss"].targets(Y)
    Y = Y - np.asarray(msg["offset"], dtype=np.float64)
    st["Ytr"], st["Yva"] = Y[~val], Y[val]
    st["labels_va"] = np.asarray(part.y).reshape(-1)[val] if msg["targets"]["kind"] == "ovr" else None
    cap = int(msg.get("capacity", 16))
    # column-major: a column is contiguous, so appending one touches only its own pages (the
    # untouched capacity stays virtual) and B's row stride never depends on the capacity
    cap = max(1, min(cap, CACHE_BYTES_UP_FRONT // max(1, len(X) * X.dtype.itemsize)))
    st["Btr"] = np.empty((len(st["Xtr"]), cap), dtype=X.dtype, order="F")
    st["Bva"] = np.empty((len(st["Xva"]), cap), dtype=X.dtype, order="F")
    st["n"] = 0
    st["pending"] = None
    _set_coef(st, np.zeros((0, Y.shape[1])))
    out = {"fetched": fetch_rows(part, msg.get("fetch")), "rss": np.einsum("ij,ij->j", st["R"], st["R"])}
    if st["loss"] is not None:
        out["loss"] = st["loss"].value(st["Ytr"], st["F"]).sum(axis=0)
    return out


def _append_column(st: dict, col_tr: np.ndarray, col_va: np.ndarray) -> None:
    n = st["n"]
    if n == st["Btr"].shape[1]:
        for key in ("Btr", "Bva"):
            old = st[key]
            new = np.empty((old.shape[0], max(2 * old.shape[1], 1)), dtype=old.dtype, order="F")
            new[:, :n] = old[:, :n]
            st[key] = new
    st["Btr"][:, n] = col_tr
    st["Bva"][:, n] = col_va
    st["n"] = n + 1


def _set_coef(st: dict, coef: np.ndarray) -> None:
    """Recompute the residual from the targets and ``coef`` (no drift, O(rows·n·m))."""
    n, m = st["n"], st["Ytr"].shape[1]
    coef = np.asarray(coef, dtype=np.float64).reshape(n, m)
    st["coef"] = coef
    B = st["Btr"][:, :n]
    if st["loss"] is None:
        # the product in the basis-cache dtype: a float32 cache is never upcast (an N x n copy)
        st["R"] = st["Ytr"] - B @ coef.astype(B.dtype, copy=False) if n else st["Ytr"].copy()
        return
    st["F"] = (B @ coef).astype(np.float64, copy=False) if n else np.zeros_like(st["Ytr"])
    st["R"] = -st["loss"].gradient(st["Ytr"], st["F"])


def _move_fit(st: dict, w, beta) -> None:
    """Rank-one residual update after the last column joined with coefficient ``beta`` (m,).

    The earlier coefficients moved by ``-w βᵀ`` (``w=None``: they stayed), so the fit moves by
    ``u βᵀ`` with ``u = d − B w``: O(rows·(n + m)) instead of the O(rows·n·m) of
    :func:`_set_coef`. The driver recomputes fully every few updates (drift bound) and replays
    the updates on a rebuilt partition in the same order.
    """
    n, m = st["n"], st["Ytr"].shape[1]
    beta = np.asarray(beta, dtype=np.float64).reshape(1, m)
    d = st["Btr"][:, n - 1]
    if w is not None and n > 1:
        B = st["Btr"][:, : n - 1]
        u = (d - B @ np.asarray(w).astype(B.dtype, copy=False)).astype(np.float64)
    else:
        u = d.astype(np.float64)
    if st["loss"] is None:
        st["R"] -= u[:, None] * beta
    else:
        st["F"] += u[:, None] * beta
        st["R"] = -st["loss"].gradient(st["Ytr"], st["F"])


def _validation(st: dict, msg_val: dict) -> dict:
    n = st["n"]
    Fva = st["Bva"][:, :n] @ st["coef"] if n else np.zeros_like(st["Yva"])
    out = {"val_n": len(Fva)}
    if st["loss"] is None:
        Rva = st["Yva"] - Fva
        out["val_sse"] = float(np.einsum("ij,ij->", Rva, Rva))
    else:
        out["val_loss"] = float(st["loss"].value(st["Yva"], Fva).sum())
    if msg_val.get("metric") == "accuracy" and st["labels_va"] is not None:
        F = Fva + np.asarray(msg_val["intercept"], dtype=np.float64)
        classes = np.asarray(msg_val["classes"])
        pred = classes[(F[:, 0] > 0).astype(int)] if F.shape[1] == 1 else classes[np.argmax(F, axis=1)]
        out["val_correct"] = int(np.sum(pred == st["labels_va"]))
    return out


CROSS_BLOCK_ROWS = 2048
"""Row block of :func:`_cross64` (its float64 scratch is CROSS_BLOCK_ROWS × basis capacity)."""

CACHE_BYTES_UP_FRONT = 1 << 31
"""Basis-cache capacity reserved at init (virtual until written): n_basis columns unless that
exceeds this many bytes per partition; beyond it the cache doubles as it fills."""


def _work_buffer(st: dict, size: int, dtype, key: str = "work") -> np.ndarray:
    """A flat scratch buffer kept with the partition and grown only when too small."""
    buf = st.get(key)
    if buf is None or buf.size < size or buf.dtype != dtype:
        buf = st[key] = np.empty(max(size, 1), dtype=dtype)
    return buf


def _score_candidates(st: dict, Z, Z_sq, want_cross: bool) -> dict:
    """Row-blocked pass over the training rows: ``d_kᵀR``, ``‖d_k‖²`` and optionally ``d_kᵀB``."""
    Xtr, R, n = st["Xtr"], st["R"], st["n"]
    kernels = st["kernels"]
    s, m = len(Z), R.shape[1]
    S = s * len(kernels)
    corr = np.zeros((S, m))
    sqn = np.zeros(S)
    cross = np.zeros((S, n)) if want_cross else None
    rows = max(1, BLOCK_ELEMENTS // max(s, 1))
    Rc = R.astype(Xtr.dtype, copy=False)
    rbf_group = [q for q, k in enumerate(kernels) if getattr(k, "name", None) == "rbf"]
    shared = len(rbf_group) > 1  # several RBF widths: one GEMM + one distance pass for all
    buf = _work_buffer(st, min(rows, len(Xtr)) * s, np.result_type(Xtr, Z))
    for a in range(0, len(Xtr), rows):
        b = min(a + rows, len(Xtr))
        blocks = {}
        if shared:
            gammas = [kernels[q].get("gamma") for q in rbf_group]
            blocks = dict(zip(rbf_group, rbf_multi(Xtr[a:b], Z, gammas, X_sqnorm=st["sq_tr"][a:b], Y_sqnorm=Z_sq)))
        out = buf[: (b - a) * s].reshape(b - a, s)
        for q, kernel in enumerate(kernels):
            K = blocks.pop(q) if q in blocks else kernel_block(kernel, Xtr[a:b], st["sq_tr"][a:b], Z, Z_sq, out=out)
            sl = slice(q * s, (q + 1) * s)
            corr[sl] += K.T @ Rc[a:b]
            sqn[sl] += np.einsum("ij,ij->j", K, K)
            if want_cross and n:
                cross[sl] += K.T @ st["Btr"][a:b, :n]
    return {"corr": corr, "sqn": sqn, "cross": cross}


def kmp_step(part: Partition, msg: dict) -> dict:
    """One pass: accept the pending column, set coefficients, score candidates, fetch rows.

    Message keys: ``accept`` (bool), ``coef`` ((n, m) or None to keep), ``update`` (``(w, β)``:
    move the residual by a rank-one update, see :func:`_move_fit`; None: recompute it from
    ``coef``), ``cand`` (s, d) candidate
    rows or None, ``cand_sq`` their squared norms, ``want_cross`` (bool), ``fetch`` (global
    indices whose rows to return), ``val`` (dict or None: validation metric request).
    Results: ``rss`` (m,) = ‖R‖² per output, plus for other losses ``loss`` (m,) training loss
    and ``rsum`` (m,) = Σ R (the bias atom's correlation), plus the candidate reductions.
    """
    st = part.state
    if msg.get("accept"):
        col_tr, col_va = st.pop("pending")
        _append_column(st, col_tr, col_va)
        st["pending"] = None
    if msg.get("update") is not None:
        if not msg.get("accept"):
            raise ValueError("kmp_step: an 'update' belongs to the column accepted in the same step")
        _move_fit(st, *msg["update"])
        st["coef"] = np.asarray(msg["coef"], dtype=np.float64).reshape(st["n"], -1)
    elif msg.get("coef") is not None:
        _set_coef(st, msg["coef"])
    R = st["R"]
    out = {"rss": np.einsum("ij,ij->j", R, R), "rsum": R.sum(axis=0)}
    if st["loss"] is not None:
        out["loss"] = st["loss"].value(st["Ytr"], st["F"]).sum(axis=0)
    if msg.get("cand") is not None:
        out.update(_score_candidates(st, msg["cand"], msg.get("cand_sq"), msg.get("want_cross", False)))
    if msg.get("val") is not None:
        out.update(_validation(st, msg["val"]))
    if msg.get("fetch") is not None:
        out["fetched"] = fetch_rows(part, msg["fetch"])
    return out


def _cross64(B: np.ndarray, d: np.ndarray, scratch: np.ndarray | None = None,
             block_rows: int = CROSS_BLOCK_ROWS) -> np.ndarray:
    """``Bᵀd`` accumulated in float64 without an N × n float64 copy of a float32 cache.

    Row blocks of a float32 ``B`` are cast into ``scratch`` (≥ block_rows·n float64, reused
    across iterations: a fresh float64 block per call is a fresh mmap whose pages fault in) and
    reduced.
    Float32 accumulation over N rows would put ~√N·ε₃₂ relative error into the Gram.
    """
    if B.dtype == np.float64:
        return B.T @ d
    n = B.shape[1]
    if scratch is None or scratch.size < min(block_rows, B.shape[0]) * n:
        scratch = np.empty(min(block_rows, B.shape[0]) * n)
    out = np.zeros(n)
    for a in range(0, B.shape[0], block_rows):
        blk = B[a : a + block_rows]
        tmp = scratch[: blk.size]  # laid out like blk, so the cast is a streaming copy
        tmp = tmp.reshape(n, blk.shape[0]).T if blk.strides[0] <= blk.strides[1] else tmp.reshape(blk.shape)
        np.copyto(tmp, blk)
        out += d[a : a + block_rows] @ tmp
    return out


def kmp_commit(part: Partition, msg: dict) -> dict:
    """Compute the chosen column and the products the driver needs; keep it pending.

    ``msg``: ``z`` (d,) and ``kernel`` (index into the dictionary's kernels), or ``bias=True``
    for the constant atom. The column waits as ``pending`` until the next :func:`kmp_step`
    accepts it. Returns (float64) ``cross = Bᵀd`` (n,), ``sqn = ‖d‖²``, ``corr = dᵀR`` (m,),
    ``ytd = dᵀY`` (m,) and, for other losses, the Newton statistics of the line search at step 0
    (``grad = Σ d ∂L/∂f``, ``hess = Σ d² ∂²L/∂f²``, ``loss``).
    """
    st = part.state
    if msg.get("bias"):
        col_tr = np.ones(len(st["Xtr"]), dtype=st["Btr"].dtype)
        col_va = np.ones(len(st["Xva"]), dtype=st["Bva"].dtype)
    else:
        kernel = st["kernels"][int(msg.get("kernel", 0))]
        z = np.asarray(msg["z"]).reshape(1, -1)
        z_sq = sqnorm(z)
        col_tr = kernel_block(kernel, st["Xtr"], st["sq_tr"], z, z_sq)[:, 0]
        col_va = kernel_block(kernel, st["Xva"], st["sq_va"], z, z_sq)[:, 0]
    st["pending"] = (col_tr, col_va)
    d = col_tr.astype(np.float64)
    n = st["n"]
    out = {
        "cross": _cross64(st["Btr"][:, :n], d, _work_buffer(
            st, min(CROSS_BLOCK_ROWS, len(d)) * st["Btr"].shape[1], np.float64, key="work64")),
        "sqn": float(d @ d),
        "corr": st["R"].T @ d,
        "ytd": st["Ytr"].T @ d,
    }
    if st["loss"] is not None:
        out.update(_line_stats(st, d, np.zeros((1, st["R"].shape[1]))))
    return out


def _line_stats(st: dict, d: np.ndarray, alphas: np.ndarray) -> dict:
    """Loss, directional gradient and curvature along ``d`` at each trial step (k, m)."""
    loss, Y, F = st["loss"], st["Ytr"], st["F"]
    k, m = alphas.shape
    out = {"loss": np.zeros((k, m)), "grad": np.zeros((k, m)), "hess": np.zeros((k, m))}
    d2 = d * d
    for i in range(k):
        Fi = F + d[:, None] * alphas[i][None, :]
        out["loss"][i] = loss.value(Y, Fi).sum(axis=0)
        out["grad"][i] = d @ loss.gradient(Y, Fi)
        out["hess"][i] = d2 @ loss.hessian(Y, Fi)
    return out


def kmp_linesearch(part: Partition, msg: dict) -> dict:
    """Line-search statistics along the pending column at trial steps ``msg['alphas']`` (k, m)."""
    st = part.state
    d = st["pending"][0].astype(np.float64)
    return _line_stats(st, d, np.atleast_2d(np.asarray(msg["alphas"], dtype=np.float64)))


def kmp_refit_stats(part: Partition, msg: dict) -> dict:
    """Newton refit of all coefficients (other losses): losses at trial coefficients, stats.

    ``msg``: ``coefs`` list of (n, m) coefficient matrices whose training loss to return
    (``loss`` (k, m)); ``stats`` index into ``coefs`` (or None) at which to also return the
    gradient ``Bᵀ∂L/∂f`` (n, m) and the per-output curvature ``Bᵀ diag(h) B`` (m, n, n).
    With ``accept`` the pending column joins the basis first (its coefficient 0 until the next
    :func:`kmp_step` sets new coefficients).
    """
    st = part.state
    if msg.get("accept") and st.get("pending") is not None:  # idempotent: a rebuilt partition has it
        _append_column(st, *st.pop("pending"))
        st["pending"] = None
        st["coef"] = np.vstack([st["coef"], np.zeros((1, st["coef"].shape[1]))])
    n, loss, Y = st["n"], st["loss"], st["Ytr"]
    B = st["Btr"][:, :n].astype(np.float64, copy=False)
    coefs = [np.asarray(c, dtype=np.float64).reshape(n, Y.shape[1]) for c in msg["coefs"]]
    out = {"loss": np.zeros((len(coefs), Y.shape[1]))}
    for i, c in enumerate(coefs):
        F = B @ c
        out["loss"][i] = loss.value(Y, F).sum(axis=0)
        if msg.get("stats") == i:
            out["grad"] = B.T @ loss.gradient(Y, F)
            out["hess"] = np.stack([_weighted_gram(B, h) for h in loss.hessian(Y, F).T])
    return out


def _weighted_gram(B: np.ndarray, h: np.ndarray) -> np.ndarray:
    """``Bᵀ diag(h) B`` (n, n); a symmetric rank-k update (half a GEMM's work) when h ≥ 0."""
    if B.shape[1] > 1 and B.dtype == np.float64 and np.all(h >= 0):
        W = B * np.sqrt(h)[:, None]
        # U = upper triangle of Wᵀ W, without a copy for either memory layout of W
        U = _dsyrk(1.0, W, trans=1) if W.flags.f_contiguous else _dsyrk(1.0, W.T)
        return np.triu(U) + np.triu(U, 1).T
    return (B * h[:, None]).T @ B


def kmp_restore(part: Partition, msg: dict) -> dict:
    """Rebuild a partition's KMP state from the driver's state (after a lost worker).

    ``msg`` is the :func:`kmp_init` message plus ``basis`` — a list of ``(z, kernel)`` pairs,
    ``z=None`` for the bias atom — ``coef`` (n, m), ``pending`` (one such pair or None) and
    ``sync``: the coefficients of the last full residual recomputation (``n``, ``coef``) and
    the rank-one ``updates`` since, replayed in order. Basis columns beyond those have
    coefficient 0 in the residual (accepted by a Newton refit pass, not yet stepped).
    """
    kmp_init(part, {**msg, "fetch": None})
    st = part.state
    # Column by column, exactly as kmp_commit computes them, so a rebuilt partition is bit for
    # bit the partition that was lost.
    for z, q in msg["basis"]:
        kmp_commit(part, {"z": z, "kernel": q, "bias": z is None})
        _append_column(st, *st.pop("pending"))
        st["pending"] = None
    n_all, sync = st["n"], msg.get("sync")
    if sync is None:
        if n_all:
            _set_coef(st, msg["coef"])
    else:
        st["n"] = int(sync["n"])
        _set_coef(st, sync["coef"])
        for w, beta in sync["updates"]:
            st["n"] += 1
            _move_fit(st, w, beta)
        st["n"] = n_all
        st["coef"] = np.asarray(msg["coef"], dtype=np.float64).reshape(n_all, -1)
    if msg.get("pending") is not None:
        z, q = msg["pending"]
        kmp_commit(part, {"z": z, "kernel": q, "bias": z is None})
    return {"n": st["n"]}
