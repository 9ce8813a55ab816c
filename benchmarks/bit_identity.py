"""Bit-identity of fitted models across a restructuring: one fingerprint per configuration.

A restructuring of the code (moving loops between layers, splitting classes, renaming internals)
must not change any model. This script fits a fixed list of configurations covering every family
— KMP (every fit mode, stochastic and full candidate sets, losses, mixed-kernel dictionaries, the
intercept, early stopping, store input, a process cluster), CVM, MMDA, sparse KPCA (fixed size and
bound-chosen), sparse KCCA and the reduced-set compressor (SVC, kernel ridge and our own KMP models;
HMP with and without backfitting, chunked, exchanged, the ``decrease`` criterion, ℓ0 and ℓ1
baselines) — on seeded data, and fingerprints each fitted estimator: SHA-256 over the bytes of its
outputs on fixed held-out rows (``decision_function`` / ``predict`` / ``transform``) and of every
fitted NumPy attribute (names ending in ``_``; times excluded).

Every configuration passes its kernel width explicitly, so a change of a *default* does not show
up here; a change of behaviour under an explicit configuration does.

Usage::

    python benchmarks/bit_identity.py --record      # write benchmarks/results/bit_identity.json
    python benchmarks/bit_identity.py               # compare with it; exit 1 on any difference
    python benchmarks/bit_identity.py --only kmp    # configurations whose name contains "kmp"

Fingerprints hold on one machine and one set of library versions (BLAS and NumPy may round
differently elsewhere): record on the commit before a restructuring, check after it, on the same
machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as H

NAME = "bit_identity"
SKIP_ATTRS = ("time", "seconds", "fit_time", "n_features_in_", "feature_names_in_")


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------
def _data():
    import numpy as np
    from sklearn.datasets import make_classification, make_regression

    Xc, yc = make_classification(n_samples=700, n_features=6, n_informative=4, n_classes=3,
                                 n_clusters_per_class=1, random_state=0)
    Xb, yb = make_classification(n_samples=600, n_features=5, n_informative=3, random_state=1)
    Xr, yr = make_regression(n_samples=600, n_features=5, noise=5.0, random_state=2)
    Xr, yr = Xr / Xr.std(0), yr / yr.std()
    rng = np.random.default_rng(3)
    Yk = np.c_[Xr[:, :2] @ rng.normal(size=(2, 3)), rng.normal(size=(600, 1))]
    return {"multi": (Xc[:500], yc[:500], Xc[500:]), "binary": (Xb[:450], yb[:450], Xb[450:]),
            "reg": (Xr[:450], yr[:450], Xr[450:]), "kcca": (Xr[:450], Yk[:450], Xr[450:])}


# --------------------------------------------------------------------------------------------
# Fingerprints
# --------------------------------------------------------------------------------------------
def _update(h, name, value):
    import numpy as np

    arr = np.asarray(value)
    if arr.dtype == object:
        arr = np.asarray([repr(v) for v in arr.ravel()])
    h.update(name.encode())
    h.update(str(arr.dtype).encode() + str(arr.shape).encode())
    h.update(np.ascontiguousarray(arr).tobytes())


def _attributes(est):
    import numpy as np

    for name in sorted(vars(est)):
        if not name.endswith("_") or name.startswith("_") or any(s in name for s in SKIP_ATTRS):
            continue
        value = getattr(est, name)
        if isinstance(value, np.ndarray) and value.dtype != object:
            yield name, value
        elif isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
            yield name, np.asarray(value)


def _outputs(est, X_test):
    for method in ("decision_function", "predict", "transform"):
        fn = getattr(est, method, None)
        if fn is None:
            continue
        try:
            yield method, fn(X_test)
        except (AttributeError, NotImplementedError, TypeError):
            continue


def fingerprint(est, X_test) -> dict:
    """``{"outputs": sha, "attributes": sha, "names": [...]}`` of a fitted estimator."""
    out, att, names = hashlib.sha256(), hashlib.sha256(), []
    for method, value in _outputs(est, X_test):
        _update(out, method, value)
        names.append(method)
    for name, value in _attributes(est):
        _update(att, name, value)
        names.append(name)
    return {"outputs": out.hexdigest(), "attributes": att.hexdigest(), "names": names}


# --------------------------------------------------------------------------------------------
# Configurations: name -> function(data, workdir) returning (fitted estimator, X_test)
# --------------------------------------------------------------------------------------------
def _kmp(kind, data_key, **params):
    def run(data, workdir):
        import kmp_dask

        X, y, X_test = data[data_key]
        cls = kmp_dask.KMPClassifier if kind == "clf" else kmp_dask.KMPRegressor
        base = {"gamma": 0.3, "n_basis": 25, "random_state": 0}
        return cls(**{**base, **params}).fit(X, y), X_test
    return run


def _kmp_store(client_kind):
    def run(data, workdir):
        import kmp_dask

        X, y, X_test = data["multi"]
        store = _store(workdir, f"multi_{client_kind}", X, y)
        return _where(client_kind, lambda client: kmp_dask.KMPClassifier(
            gamma=0.3, n_basis=25, random_state=0, client=client).fit(store)), X_test
    return run


def _on_cluster(fit):
    """``fit(client)`` on a two-process LocalCluster; the fitted estimator without its client."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        est = fit(client)
    est.client = None
    return est


def _where(client_kind, fit):
    """``fit(client)`` in process (``client="sync"``) or on a two-process LocalCluster."""
    return fit("sync") if client_kind == "sync" else _on_cluster(fit)


def _store(workdir, name, X, y=None):
    from kmp_dask.store import create_store

    return create_store(Path(workdir) / f"{name}.zarr", X, y, chunk_rows=64)


def _cvm_store(cls_name, client_kind, **params):
    def run(data, workdir):
        import kmp_dask

        X, y, X_test = data["multi"]
        store = _store(workdir, f"{cls_name}_{client_kind}", X, y)
        make = lambda client: getattr(kmp_dask, cls_name)(**{"gamma": 0.3, "random_state": 0, "client": client,
                                                               **params})
        return _where(client_kind, lambda client: make(client).fit(store)), X_test
    return run


def _kpca_store(client_kind):
    def run(data, workdir):
        import kmp_dask

        X, _, X_test = data["multi"]
        store = _store(workdir, f"kpca_{client_kind}", X)
        make = lambda client: kmp_dask.SparseKernelPCA(n_components=12, gamma=0.3, random_state=0, client=client)
        return _where(client_kind, lambda client: make(client).fit(store)), X_test
    return run


def _rs_store(client_kind):
    def run(data, workdir):
        import kmp_dask

        X, y, X_test = data["binary"]
        model, store = _source("svc", X, y), _store(workdir, f"pool_{client_kind}", X, y)
        make = lambda client: kmp_dask.ReducedSetCompressor(12, random_state=0, client=client)
        return _where(client_kind, lambda client: make(client).fit(model, store)), X_test
    return run


def _cvm(cls_name, data_key, **params):
    def run(data, workdir):
        import kmp_dask

        X, y, X_test = data[data_key]
        est = getattr(kmp_dask, cls_name)(**{"gamma": 0.3, "random_state": 0, **params})
        return est.fit(X, y), X_test
    return run


def _kpca(**params):
    def run(data, workdir):
        import kmp_dask

        X, _, X_test = data["multi"]
        return kmp_dask.SparseKernelPCA(**{"gamma": 0.3, "random_state": 0, **params}).fit(X), X_test
    return run


def _kcca(**params):
    def run(data, workdir):
        import kmp_dask

        X, Y, X_test = data["kcca"]
        est = kmp_dask.SparseKCCA(**{"gamma_x": 0.3, "gamma_y": 0.3, "random_state": 0, **params})
        return est.fit(X, Y), X_test
    return run


def _source(kind, X, y):
    if kind == "svc":
        from sklearn.svm import SVC

        return SVC(kernel="rbf", gamma=0.3, C=1.0).fit(X, y)
    if kind == "krr":
        from sklearn.kernel_ridge import KernelRidge

        return KernelRidge(kernel="rbf", gamma=0.3, alpha=0.1).fit(X, y)
    import kmp_dask

    return kmp_dask.KMPClassifier(gamma=0.3, n_basis=60, random_state=0).fit(X, y)


def _rs(source, data_key, n_vectors=12, **params):
    def run(data, workdir):
        import kmp_dask

        X, y, X_test = data[data_key]
        model = _source(source, X, y)
        est = kmp_dask.ReducedSetCompressor(n_vectors, **{"random_state": 0, **params})
        return est.fit(model, X, y), X_test
    return run


CONFIGS = {
    "kmp_clf_backfit_auto": _kmp("clf", "multi"),
    "kmp_clf_backfit_all": _kmp("clf", "multi", candidates="all"),
    "kmp_clf_basic": _kmp("clf", "binary", fit_mode="basic", candidates="all"),
    "kmp_clf_prefit": _kmp("clf", "binary", fit_mode="prefit", candidates=40),
    "kmp_clf_refit": _kmp("clf", "multi", fit_mode="refit", candidates=40),
    "kmp_clf_logistic": _kmp("clf", "binary", loss="logistic", fit_mode="basic"),
    "kmp_clf_mixed_kernels": _kmp("clf", "binary", kernel=["rbf", "laplacian"], gamma=[0.1, 1.0]),
    "kmp_clf_no_intercept_recomputed": _kmp("clf", "binary", fit_intercept=False, basis_columns="recomputed"),
    "kmp_clf_early_stopping": _kmp("clf", "multi", n_basis=60, validation_fraction=0.2, n_iter_no_change=5),
    "kmp_reg_backfit": _kmp("reg", "reg"),
    "kmp_reg_huber": _kmp("reg", "reg", loss="huber", fit_mode="basic"),
    "kmp_reg_bound": _kmp("reg", "reg", n_basis=40, stopping="bound", bound_threshold=0.5),
    "kmp_store_sync": _kmp_store("sync"),
    "kmp_store_localcluster": _kmp_store("local"),
    "cvm_binary": _cvm("CVMClassifier", "binary"),
    "cvm_multi": _cvm("CVMClassifier", "multi", C=10.0),
    "mmda": _cvm("MMDA", "multi", n_components=2),
    "cvm_store_sync": _cvm_store("CVMClassifier", "sync", C=1.0),  # C="auto" (the default since) is 2 here
    "cvm_store_localcluster": _cvm_store("CVMClassifier", "local", C=1.0),
    "mmda_store_sync": _cvm_store("MMDA", "sync", n_components=2),
    "mmda_store_localcluster": _cvm_store("MMDA", "local", n_components=2),
    "kpca_fixed": _kpca(n_components=12),
    "kpca_store_sync": _kpca_store("sync"),
    "kpca_store_localcluster": _kpca_store("local"),
    "kpca_bound": _kpca(n_components="bound", max_components=30),
    "kpca_candidates": _kpca(n_components=12, candidates=50),
    "kcca": _kcca(n_components=4),
    "rs_svc_hmp": _rs("svc", "binary"),
    "rs_svc_hmp_nobackfit": _rs("svc", "binary", backfit=False),
    "rs_svc_chunked": _rs("svc", "binary", chunk_vectors=40),
    "rs_svc_exchange": _rs("svc", "binary", exchange=1, exchange_guard=False),
    "rs_svc_engine": _rs("svc", "binary", dense=False),
    "rs_svc_engine_candidates": _rs("svc", "binary", dense=False, candidates=60),
    "rs_svc_store_sync": _rs_store("sync"),
    "rs_svc_store_localcluster": _rs_store("local"),
    "rs_svc_decrease": _rs("svc", "binary", criterion="decrease"),
    "rs_svc_l0": _rs("svc", "binary", method="l0"),
    "rs_svc_l1": _rs("svc", "binary", method="l1"),
    "rs_krr": _rs("krr", "reg"),
    "rs_kmp_multi": _rs("kmp", "multi", n_vectors=20),
}


def run(names, workdir) -> dict:
    import warnings

    data, out = _data(), {}
    for name in names:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est, X_test = CONFIGS[name](data, workdir)
        out[name] = fingerprint(est, X_test)
        H.log(f"{name}: {out[name]['outputs'][:12]} {out[name]['attributes'][:12]} "
              f"({time.perf_counter() - t0:.1f} s)")
    return out


def compare(found: dict, recorded: dict) -> list[str]:
    """Names whose fingerprint differs from the recorded one (or that were never recorded)."""
    bad = []
    for name, fp in found.items():
        ref = recorded.get(name)
        if ref is None:
            bad.append(f"{name}: not recorded")
        elif ref["outputs"] != fp["outputs"] or ref["attributes"] != fp["attributes"]:
            which = [k for k in ("outputs", "attributes") if ref[k] != fp[k]]
            extra = sorted(set(fp["names"]) ^ set(ref["names"]))
            bad.append(f"{name}: {' and '.join(which)} differ"
                       + (f" (attributes added/removed: {extra})" if extra else ""))
    return bad


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--record", action="store_true", help="write the fingerprints as the reference")
    p.add_argument("--only", default=None, help="only configurations whose name contains this")
    p.add_argument("--reference", default=str(H.RESULTS / f"{NAME}.json"))
    args = p.parse_args(argv)
    H.set_threads(1)
    names = [n for n in CONFIGS if args.only is None or args.only in n]
    with tempfile.TemporaryDirectory(prefix="kmp_bitid_") as workdir:
        found = run(names, workdir)
    ref_path = Path(args.reference)
    if args.record:
        doc = json.loads(ref_path.read_text()) if ref_path.exists() and args.only else {"fingerprints": {}}
        doc["fingerprints"].update(found)
        doc["environment"] = H.environment()
        H.write_json(ref_path, doc)
        H.log(f"recorded {len(found)} fingerprints in {H.display_path(ref_path)}")
        return 0
    bad = compare(found, json.loads(ref_path.read_text())["fingerprints"])
    for line in bad:
        H.log("DIFFERENT " + line)
    H.log(f"{len(found) - len(bad)} of {len(found)} configurations bit-identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
