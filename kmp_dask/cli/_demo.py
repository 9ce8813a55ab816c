"""``demo``: the README's main job on a real data set, end to end on an embedded process cluster."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from ._main import main
from ._where import Where, check_where


def _split_standardise(ds, test_size, seed):
    from sklearn.model_selection import train_test_split

    stratify = ds.y if ds.task == "classification" else None
    Xtr, Xte, ytr, yte = train_test_split(ds.X, ds.y, test_size=test_size, random_state=seed, stratify=stratify)
    mean, std = Xtr.mean(axis=0), Xtr.std(axis=0)
    std[std == 0] = 1.0
    return (Xtr - mean) / std, (Xte - mean) / std, ytr, yte


def _demo_stores(ds, dataset, work, split, seed, overwrite):
    """The demo's train and test stores in ``work`` (the standardised 70/30 split ``split``)."""
    from ..store import create_store

    Xtr, Xte, ytr, yte = split
    work.mkdir(parents=True, exist_ok=True)
    name = dataset.split(":")[-1]
    provenance = {"source": dataset, "split": "70/30 stratified", "seed": seed, "standardised": "train mean/std"}
    tr = create_store(work / f"{name}-train.zarr", Xtr, ytr, classes=ds.classes, overwrite=overwrite,
                      feature_names=ds.feature_names, provenance=provenance)
    te = create_store(work / f"{name}-test.zarr", Xte, yte, classes=ds.classes, overwrite=overwrite,
                      feature_names=ds.feature_names, provenance=provenance)
    click.echo(f"ingested {dataset}: train {tr.n_rows} x {tr.n_features} -> {tr.url}, "
               f"test {te.n_rows} rows -> {te.url}")
    return tr, te


@main.command(short_help="The README's main job end to end on a bundled data set.",
              epilog="\b\nExamples:\n  kmp-dask demo\n  kmp-dask demo --dataset keel:twonorm --n-basis 200 --workers 2")
@click.option("--dataset", default="keel:banana", show_default=True,
              help="keel:NAME or sklearn:NAME (bundled data only; nothing is downloaded).")
@click.option("--workdir", default="kmp-demo", show_default=True, type=click.Path(file_okay=False),
              help="Where the train/test zarr stores are written.")
@click.option("--n-basis", default=100, show_default=True, help="Basis functions to select.")
@click.option("--candidates", default="auto", show_default=True,
              help="'auto' (59 = ceil(log .05 / log .95)), 'all', or an int.")
@click.option("--gamma", default=None, type=float, help="RBF width (default: 'scale', 1 / (n_features · Var X)).")
@click.option("--workers", default=2, show_default=True, help="Worker processes of the embedded cluster.")
@click.option("--scheduler", default=None, help="Use this scheduler address / file instead of an embedded cluster.")
@click.option("--every", default=10, show_default=True, help="Print a progress line every N iterations.")
@click.option("--seed", default=0, show_default=True)
@click.option("--overwrite/--no-overwrite", default=True, show_default=True,
              help="Replace the demo stores in --workdir if they exist.")
def demo(dataset, workdir, n_basis, candidates, gamma, workers, scheduler, every, seed, overwrite):
    """Ingest DATASET, train stochastic KMP on a local process cluster, compare with SVC and
    with the SVC compressed to as many vectors by reduced-set selection."""
    import numpy as np
    from sklearn.svm import SVC

    from ..datasets import load
    from ..estimators import KMPClassifier
    from ..parallel import embedded_cluster, resolve_client
    from ..parallel._client import scheduler_identity
    from ..parallel._waits import compute_bounded
    from ..reduced import ReducedSetCompressor
    from ._params import candidates_value

    cand = candidates_value(candidates)  # before anything is written
    if scheduler:
        check_where(Where(scheduler=scheduler))  # before anything is written to --workdir
    ds = load(dataset)
    if ds.task != "classification":
        raise click.BadParameter(f"the demo needs a classification data set; {dataset} is {ds.task}",
                                 param_hint="--dataset")
    Xtr, Xte, ytr, yte = _split_standardise(ds, 0.3, seed)
    work = Path(workdir)
    tr, te = _demo_stores(ds, dataset, work, (Xtr, Xte, ytr, yte), seed, overwrite)

    clf = KMPClassifier(n_basis=n_basis, candidates=cand, gamma="scale" if gamma is None else gamma,
                        random_state=seed, verbose=every)
    cm = resolve_client(scheduler, in_memory=False) if scheduler else embedded_cluster(workers)
    with cm as client:
        n_workers = len(scheduler_identity(client)["workers"])  # every worker, not the cache
        click.echo(f"dask cluster: {n_workers} workers ({'embedded LocalCluster' if not scheduler else scheduler})")
        clf.set_params(client=client)
        t0 = time.perf_counter()
        clf.fit(tr.url)
        fit_s = time.perf_counter() - t0
        pred = np.asarray(compute_bounded(clf.predict(te.url), what="test predictions")[0])
    acc = float(np.mean(pred == np.asarray(ds.classes)[yte]))

    t0 = time.perf_counter()
    svc = SVC(C=1.0, gamma=clf.kernel_.get("gamma")).fit(Xtr, ytr)
    svc_s = time.perf_counter() - t0
    svc_acc = float(svc.score(Xte, yte))
    # the SVC compressed to as many vectors as KMP selected (Weston & Bakır reduced-set selection)
    n_small = int(min(max(clf.n_basis_, 1), svc.n_support_.sum()))
    t0 = time.perf_counter()
    small = ReducedSetCompressor(n_vectors=n_small).fit(svc, Xtr, ytr)
    rs_s = time.perf_counter() - t0
    rs_acc = float(small.score(Xte, yte))
    summary = {
        "dataset": dataset, "n_train": int(tr.n_rows), "n_test": int(te.n_rows),
        "kmp": {"accuracy": acc, "n_basis": int(clf.n_basis_), "fit_seconds": fit_s, "stop_reason": clf.stop_reason_},
        "svc": {"accuracy": svc_acc, "n_support": int(svc.n_support_.sum()), "fit_seconds": svc_s},
        "svc_reduced_set": {"accuracy": rs_acc, "n_vectors": int(small.n_vectors_), "compress_seconds": rs_s},
    }
    click.echo(f"KMP : test accuracy {acc:.4f} with {clf.n_basis_} basis functions "
               f"(fit {fit_s:.1f} s, stop: {clf.stop_reason_})")
    click.echo(f"SVC : test accuracy {svc_acc:.4f} with {summary['svc']['n_support']} support vectors "
               f"(fit {svc_s:.1f} s, same gamma, C=1)")
    click.echo(f"SVC reduced set: test accuracy {rs_acc:.4f} with {small.n_vectors_} vectors "
               f"(hyperplane matching pursuit, {rs_s:.1f} s)")
    (work / "demo-summary.json").write_text(json.dumps(summary, indent=2))
    click.echo(f"summary written to {work / 'demo-summary.json'}")


