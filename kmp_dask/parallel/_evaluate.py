"""Chunk-wise metrics and outputs of a fitted model over a store (dask; small numpy per block).

A model's predictions over a store are a lazy dask array with the store's row chunks; the
metrics here reduce them block by block with the store's labels (a confusion matrix, or the
sums behind R² / MSE / MAE), so no full column of predictions is ever gathered on the driver.
"""

from __future__ import annotations

import uuid
import weakref

import numpy as np

from ._scatter import scatter_value

__all__ = ["confusion_counts", "regression_sums", "label_codes", "chunkwise", "ship_model", "computed_blocks",
           "data_parts"]


def _as_dask(a, chunks):
    """``a`` as a dask array; a numpy array (any dtype: object labels too) is split into explicit
    row chunks (``chunks``: a tuple of sizes or an int; dask's "auto" cannot size object data)."""
    import dask.array as da

    if isinstance(a, da.Array):
        return a
    a = np.asarray(a)
    if chunks == "auto" or chunks is None:
        chunks = max(1, len(a))
    rows = chunks if isinstance(chunks, tuple) else (chunks,)
    return da.from_array(a, chunks=(rows,) + tuple(-1 for _ in a.shape[1:]))


def _codes_block(labels, classes):
    """Index of each label in ``classes`` (-1 when absent); matched by value, else by name
    (``str``), so a store's class names ("1", "True") meet a model's classes of another type."""
    labels = np.asarray(labels)
    keys = classes.tolist()
    lookup = {c: i for i, c in enumerate(keys)}
    by_name = {str(c): i for i, c in enumerate(keys)}
    return np.fromiter((lookup[v] if v in lookup else by_name.get(str(v), -1) for v in labels.tolist()),
                       dtype=np.int64, count=len(labels))


def label_codes(labels, classes, chunks="auto"):
    """Labels (a dask array, or numpy / list of any dtype) → a dask int64 array of their indices in
    ``classes`` (-1 for a label not among them); numpy labels are split into ``chunks`` rows."""
    classes = np.asarray(classes)
    labels = _as_dask(labels, chunks)
    return labels.map_blocks(_codes_block, classes, dtype=np.int64)


def _apply(model, method, block):
    """``model.<method>(block)`` on one block of rows, as a numpy array."""
    import warnings

    with warnings.catch_warnings():  # the store's feature names were compared once, before the pass
        warnings.filterwarnings("ignore", "X does not have valid feature names", UserWarning)
        return np.asarray(getattr(model, method)(np.asarray(block)))


def _shipped(model):
    """A shallow copy of ``model`` without its ``client`` (a Client does not travel to workers)."""
    import copy

    if getattr(model, "client", None) is None or isinstance(model.client, str):
        return model
    model = copy.copy(model)
    model.client = None
    return model


def ship_model(model, client=None):
    """``model`` as the predict tasks of :func:`chunkwise` take it: shipped once, every call of
    :func:`chunkwise` of one pass sharing it.

    With a ``distributed`` client, the model is scattered (:func:`~._scatter.scatter_value`: one
    copy, bounded, a key of this call only; the other workers fetch it from there) and the graphs
    refer to it by that key. It is never a literal of the graph:
    dask's scheduler unpickles every graph it receives, so a model inside one was unpickled in the
    scheduler process too (importing kmp_dask.estimators, scikit-learn, scipy.stats and pandas
    there, before any task ran), and then by the one worker that computed its key before any other
    worker could fetch it (docs/engine.md, "A cold worker's first evaluate"). Without a client
    (in process): one key of a delayed graph.
    """
    import dask

    model = _shipped(model)
    if client is None:
        return dask.delayed(model, name=f"model-{uuid.uuid4().hex}", traverse=False)
    warm_workers(client, type(model).__module__)
    return scatter_value(client, model)


#: Longest wait (seconds) for every worker to import the module of a model's class before it is
#: scattered; a worker not done by then imports it when it unpickles the model, as without it.
WARM_TIMEOUT = 120.0


_WARMED = weakref.WeakKeyDictionary()  #: client -> {(worker address, module)} imported by warm_workers


def _import_module(name):
    import importlib

    importlib.import_module(name)


def warm_workers(client, module: str, timeout: float = WARM_TIMEOUT) -> None:
    """Import ``module`` on every worker of ``client`` at once, one task per worker (bounded by
    ``timeout``; an import that fails is left to the unpickling that follows, which names it).
    A worker that imported it for this client before is not asked again.

    Unpickling a kmp_dask estimator on a fresh worker imports its class's module and with it
    scikit-learn, scipy.stats and pandas: 2.2-2.3 s of CPU in a worker process (1.3 s in a plain
    one), most of a cold worker's first ``evaluate``. A scattered model reaches one worker, and the
    others copy it from there once it is unpickled: two imports in series; imported here first,
    they overlap.
    """
    from ._waits import SchedulerLostError, wait_for

    if module in ("__main__", "builtins") or not module:
        return
    done = _WARMED.setdefault(client, set())
    todo = [w for w in client.nthreads() if (w, module) not in done]
    if not todo:
        return
    futures = {client.submit(_import_module, module, workers=[w], allow_other_workers=False, pure=False,
                             key=f"import-{module}-{uuid.uuid4().hex}"): w for w in todo}
    try:  # bounded in slices (parallel._waits): the scheduler gone is SchedulerLostError at once
        wait_for(list(futures), client, what=f"import of {module} on the workers", timeout=timeout, cancel=False)
    except SchedulerLostError:
        raise
    except Exception:  # TimeoutError, NoWorkersError: the pass that follows waits for workers itself;
        pass  # an import that fails: left to the unpickling that follows, which names it
    finally:
        done.update((w, module) for f, w in futures.items() if f.status == "finished")
        client.cancel(list(futures))


def chunkwise(model, X, method, probe, shipped=None):
    """``model.<method>`` over the dask array ``X`` as a lazy dask array, one task per row chunk of
    ``X`` (the model shipped once for all tasks: :func:`ship_model`, not once per task).

    ``probe`` (a few rows of ``X`` as numpy) gives the output's dtype and trailing shape without a
    pass over the data; ``shipped``: ``model`` as :func:`ship_model` gave it (default: shipped
    here, without a client). This is the one data pass behind ``evaluate``, ``predict_to_store``
    and ``predict_to_file``: any model with that method (kmp_dask's, scikit-learn's, a compressed
    model) predicts here, block by block, in the input's row order.
    """
    import dask
    import dask.array as da

    out0 = _apply(model, method, probe)
    tail, dtype = out0.shape[1:], out0.dtype
    X = X.rechunk({1: -1})
    m = ship_model(model) if shipped is None else shipped
    parts = [da.from_delayed(dask.delayed(_apply, pure=True)(m, method, b), shape=(int(n),) + tail, dtype=dtype)
             for b, n in zip(X.to_delayed().ravel(), X.chunks[0], strict=True)]
    if not parts:
        return da.from_array(np.empty((0,) + tail, dtype=dtype), chunks=((0,),) + tuple((k,) for k in tail))
    return da.concatenate(parts, axis=0)


def computed_blocks(arr, batch: int = 8):
    """Yield the row blocks of the dask array ``arr`` as numpy, in order, computing ``batch`` of
    them at a time (the workers run a batch in parallel; only one batch is ever in memory here)."""
    from ._waits import compute_bounded

    blocks = arr.to_delayed().ravel()
    for i in range(0, len(blocks), batch):
        yield from compute_bounded(*blocks[i:i + batch], what="batch of row blocks")


def _confusion_block(pred, true, n):
    pred, true = np.asarray(pred), np.asarray(true)
    out = np.zeros((n + 1, n + 1), dtype=np.int64)  # last row/column: labels outside the model's classes
    np.add.at(out, (np.where(true >= 0, true, n), np.where(pred >= 0, pred, n)), 1)
    return out


def confusion_counts(pred_codes, true_codes, n_classes: int) -> np.ndarray:
    """(n+1, n+1) counts: rows true class, columns predicted; index n = a label the model lacks."""
    import dask

    from ._waits import compute_bounded

    true_codes = _as_dask(true_codes, pred_codes.chunks[0]).rechunk(pred_codes.chunks[0])
    parts = [dask.delayed(_confusion_block)(p, t, n_classes)
             for p, t in zip(pred_codes.to_delayed().ravel(), true_codes.to_delayed().ravel(), strict=True)]
    return np.sum(compute_bounded(*parts, what="block of the confusion counts"), axis=0)


def _regression_block(pred, true):
    pred = np.asarray(pred, dtype=np.float64).reshape(len(pred), -1)
    true = np.asarray(true, dtype=np.float64).reshape(len(true), -1)
    err = pred - true
    return np.stack([np.full(true.shape[1], len(true), dtype=np.float64), true.sum(0), (true ** 2).sum(0),
                     (err ** 2).sum(0), np.abs(err).sum(0)])


def regression_sums(pred, true) -> dict:
    """Per output: n, Σy, Σy², Σ(ŷ−y)², Σ|ŷ−y| over all rows, one block at a time."""
    import dask

    from ._waits import compute_bounded

    pred = _as_dask(pred, "auto")
    true = _as_dask(true, pred.chunks[0])
    true = true.rechunk((pred.chunks[0],) + true.chunks[1:])
    parts = [dask.delayed(_regression_block)(p, t)
             for p, t in zip(pred.to_delayed().ravel(), true.to_delayed().ravel(), strict=True)]
    n, s, s2, sse, sae = np.sum(compute_bounded(*parts, what="block of the regression sums"), axis=0)
    return {"n": n, "sum": s, "sumsq": s2, "sse": sse, "sae": sae}


def _block_array(blocks, client):
    """Numpy row blocks as one dask array, one chunk per block: scattered to the workers first
    with a client (:func:`~._scatter.scatter_value`, not literals of a graph), in process else."""
    import dask.array as da

    if client is None:
        parts = [da.from_array(b, chunks=(len(b),) + tuple(-1 for _ in b.shape[1:])) for b in blocks]
    else:
        parts = [da.from_delayed(scatter_value(client, b), shape=b.shape, dtype=b.dtype) for b in blocks]
    return da.concatenate(parts, axis=0)


def data_parts(data, client=None, batch: int = 8):
    """The rows of ``data`` (:class:`~kmp_dask.store._scoring.ScoringData`) as ``(X, y, probe)``
    parts for :func:`chunkwise`: a store in one part (its lazy arrays, read by the tasks), a
    streamed file in parts of ``batch`` row blocks read here in order, each sent to the workers
    before its pass (one part in this process's memory at once), ``y`` None without labels."""
    import itertools

    from ..store._scoring import probe_rows

    if not data.is_stream:
        y = data.store.to_dask("y") if data.has_y else None
        yield data.store_X(), y, probe_rows(data)
        return
    blocks = data.plan.blocks()
    while True:
        raw = list(itertools.islice(blocks, batch))
        if not raw:
            return
        part = [(np.asarray(X), y) for X, y in raw if len(X)]
        if not part:
            continue
        X = _block_array([b[0] for b in part], client)
        y = _block_array([np.asarray(b[1]) for b in part], client) if data.has_y and part[0][1] is not None else None
        yield X, y, part[0][0][:2]
