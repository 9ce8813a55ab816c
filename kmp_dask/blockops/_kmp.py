"""Per-partition numerics of kernel matching pursuit (NumPy in, small NumPy out).

Each function here is an *operation* ``op(part, msg) -> dict`` that the engine runs on every
partition, wherever the partition lives. Messages are small (candidate rows, one basis row,
coefficients); results are small reductions that the driver sums in partition order.

State kept in ``part.state`` (all rebuildable from data + driver state, see :func:`kmp_restore`):

``Xtr, Xva``      training / validation rows of the partition (the split is a hash of the
                  global row index, :func:`~kmp_dask.blockops._partition.split_mask`)
``sq_tr, sq_va``  their squared row norms (cached for the RBF kernel)
``Ytr, Yva``      targets minus the intercept offset, float64, shape (rows, m)
``Btr, Bva``      cached basis columns ``k(X, z_j)``, capacity grown by doubling
``n``             number of accepted basis columns
``R``             training residual ``Ytr - Btr[:, :n] @ coef`` (float64)
``pending``       the last committed column pair, appended when the driver accepts it

Residual and score, per DESIGN.md §2: for candidate columns ``d_k = k(Xtr, z_k)`` the pass
returns ``d_kᵀR`` (s, m), ``‖d_k‖²`` (s,) and, for pre-fitting, ``d_kᵀB`` (s, n).
"""

from __future__ import annotations

import numpy as np

from ._partition import Partition, fetch_rows, split_mask

__all__ = [
    "target_matrix",
    "kmp_stats",
    "kmp_init",
    "kmp_step",
    "kmp_commit",
    "kmp_restore",
    "kernel_block",
]

#: Upper bound on the number of kernel values held at once per partition (row blocking).
BLOCK_ELEMENTS = 1 << 22


def kernel_block(kernel, X, X_sq, Z, Z_sq):
    """``kernel(X, Z)`` using cached squared norms where the kernel can use them."""
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
    """Split the partition, build targets minus ``msg['offset']`` and empty basis caches."""
    val = _val_mask(part, msg)
    X = part.X
    st = part.state
    st.clear()
    st["kernel"] = msg["kernel"]
    if val.any():
        st["Xtr"], st["Xva"] = X[~val], X[val]
    else:  # no validation rows: views, not copies (the partition's largest array)
        st["Xtr"], st["Xva"] = X, X[:0]
    st["sq_tr"], st["sq_va"] = sqnorm(st["Xtr"]), sqnorm(st["Xva"])
    offset = np.asarray(msg["offset"], dtype=np.float64)
    Y = target_matrix(part.y, msg["targets"]) - offset
    st["Ytr"], st["Yva"] = Y[~val], Y[val]
    st["labels_va"] = np.asarray(part.y).reshape(-1)[val] if msg["targets"]["kind"] == "ovr" else None
    cap = int(msg.get("capacity", 16))
    st["Btr"] = np.empty((len(st["Xtr"]), cap), dtype=X.dtype)
    st["Bva"] = np.empty((len(st["Xva"]), cap), dtype=X.dtype)
    st["n"] = 0
    st["coef"] = np.zeros((0, Y.shape[1]))
    st["R"] = st["Ytr"].copy()
    st["pending"] = None
    rows = fetch_rows(part, msg.get("fetch"))
    return {"fetched": rows, "rss": np.einsum("ij,ij->j", st["R"], st["R"])}


def _append_column(st: dict, col_tr: np.ndarray, col_va: np.ndarray) -> None:
    n = st["n"]
    if n == st["Btr"].shape[1]:
        for key in ("Btr", "Bva"):
            old = st[key]
            new = np.empty((old.shape[0], max(2 * old.shape[1], 1)), dtype=old.dtype)
            new[:, :n] = old[:, :n]
            st[key] = new
    st["Btr"][:, n] = col_tr
    st["Bva"][:, n] = col_va
    st["n"] = n + 1


def _set_coef(st: dict, coef: np.ndarray) -> None:
    """Residual ``R = Ytr - B coef`` recomputed from the targets (no drift, O(rows·n·m))."""
    n = st["n"]
    coef = np.asarray(coef, dtype=np.float64).reshape(n, -1)
    st["coef"] = coef
    if n == 0:
        st["R"] = st["Ytr"].copy()
    else:
        # the product in the basis-cache dtype: a float32 cache is never upcast (an N x n copy)
        st["R"] = st["Ytr"] - st["Btr"][:, :n] @ coef.astype(st["Btr"].dtype, copy=False)


def _validation(st: dict, msg_val: dict) -> dict:
    n = st["n"]
    Fva = st["Bva"][:, :n] @ st["coef"] if n else np.zeros_like(st["Yva"])
    Rva = st["Yva"] - Fva
    out = {"val_n": len(Rva), "val_sse": float(np.einsum("ij,ij->", Rva, Rva))}
    if msg_val.get("metric") == "accuracy" and st["labels_va"] is not None:
        F = Fva + np.asarray(msg_val["intercept"], dtype=np.float64)
        classes = np.asarray(msg_val["classes"])
        pred = classes[(F[:, 0] > 0).astype(int)] if F.shape[1] == 1 else classes[np.argmax(F, axis=1)]
        out["val_correct"] = int(np.sum(pred == st["labels_va"]))
    return out


def _score_candidates(st: dict, Z, Z_sq, want_cross: bool) -> dict:
    """Row-blocked pass over the training rows: ``d_kᵀR``, ``‖d_k‖²`` and optionally ``d_kᵀB``."""
    Xtr, R, n = st["Xtr"], st["R"], st["n"]
    s, m = len(Z), R.shape[1]
    corr = np.zeros((s, m))
    sqn = np.zeros(s)
    cross = np.zeros((s, n)) if want_cross else None
    rows = max(1, BLOCK_ELEMENTS // max(s, 1))
    Rc = R.astype(Xtr.dtype, copy=False)
    for a in range(0, len(Xtr), rows):
        b = min(a + rows, len(Xtr))
        K = kernel_block(st["kernel"], Xtr[a:b], st["sq_tr"][a:b], Z, Z_sq)
        corr += K.T @ Rc[a:b]
        sqn += np.einsum("ij,ij->j", K, K)
        if want_cross and n:
            cross += K.T @ st["Btr"][a:b, :n]
    return {"corr": corr, "sqn": sqn, "cross": cross}


def kmp_step(part: Partition, msg: dict) -> dict:
    """One pass: accept the pending column, set coefficients, score candidates, fetch rows.

    Message keys: ``accept`` (bool), ``coef`` ((n, m) or None to keep), ``cand`` (s, d) candidate
    rows or None, ``cand_sq`` their squared norms, ``want_cross`` (bool), ``fetch`` (global
    indices whose rows to return), ``val`` (dict or None: validation metric request).
    """
    st = part.state
    if msg.get("accept"):
        col_tr, col_va = st.pop("pending")
        _append_column(st, col_tr, col_va)
        st["pending"] = None
    if msg.get("coef") is not None:
        _set_coef(st, msg["coef"])
    R = st["R"]
    out = {"rss": np.einsum("ij,ij->j", R, R)}
    if msg.get("cand") is not None:
        out.update(_score_candidates(st, msg["cand"], msg.get("cand_sq"), msg.get("want_cross", False)))
    if msg.get("val") is not None:
        out.update(_validation(st, msg["val"]))
    if msg.get("fetch") is not None:
        out["fetched"] = fetch_rows(part, msg["fetch"])
    return out


def kmp_commit(part: Partition, msg: dict) -> dict:
    """Compute the column of the chosen row ``z`` and the products the driver's Cholesky needs.

    The column is kept as ``pending`` until the next :func:`kmp_step` accepts it. Returns (float64)
    ``cross = Bᵀd`` (n,), ``sqn = ‖d‖²``, ``corr = dᵀR`` (m,) and ``ytd = dᵀY`` (m,).
    """
    st = part.state
    z = np.asarray(msg["z"]).reshape(1, -1)
    z_sq = sqnorm(z)
    col_tr = kernel_block(st["kernel"], st["Xtr"], st["sq_tr"], z, z_sq)[:, 0]
    col_va = kernel_block(st["kernel"], st["Xva"], st["sq_va"], z, z_sq)[:, 0]
    st["pending"] = (col_tr, col_va)
    d = col_tr.astype(np.float64)
    n = st["n"]
    return {
        "cross": st["Btr"][:, :n].T.astype(np.float64) @ d if n else np.zeros(0),
        "sqn": float(d @ d),
        "corr": st["R"].T @ d,
        "ytd": st["Ytr"].T @ d,
    }


def kmp_restore(part: Partition, msg: dict) -> dict:
    """Rebuild a partition's KMP state from the driver's state (after a lost worker).

    ``msg`` is the :func:`kmp_init` message plus ``basis`` (n, d) rows and ``coef`` (n, m).
    """
    kmp_init(part, {**msg, "fetch": None})
    st = part.state
    # Column by column, exactly as kmp_commit computes them, so a rebuilt partition is bit for
    # bit the partition that was lost.
    for z in np.asarray(msg["basis"]):
        kmp_commit(part, {"z": z})
        _append_column(st, *st.pop("pending"))
        st["pending"] = None
    if st["n"]:
        _set_coef(st, msg["coef"])
    if msg.get("pending_z") is not None:
        kmp_commit(part, {"z": msg["pending_z"]})
    return {"n": st["n"]}
