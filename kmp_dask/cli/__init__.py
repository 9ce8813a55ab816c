"""``kmp-dask`` command line: a thin layer over the public API (no numerics here).

Commands (``kmp-dask COMMAND --help`` shows each one's options and examples)
--------------------------------------------------------------------------
``ingest``    write a data source (keel:/sklearn: sets, CSV, LIBSVM, .npy/.npz, a directory of
              them, a seeded generator) into a zarr store.
``train``     fit a model on a store (``--algorithm kmp|cvm|mmda|skpca``; ``train --algorithm A
              --help`` lists A's flags), in process or on a cluster (``--scheduler``); save it in
              the open model format; ``--checkpoint DIR`` / ``--resume``; ``--force``.
``evaluate``  accuracy / per-class metrics or R² of a saved model on a labelled store.
``predict``   chunk-wise predictions (or features) of a saved model, written to a zarr store.
``compress``  reduced-set compression of a saved model or of a scikit-learn model file.
``report``    a self-contained HTML report of saved models.
``info``      summarise a store or a saved model.
``demo``      the README's main job: ingest → train → evaluate → predict → compress → report.

Layout: ``_main.py`` (the group, error handling), ``_where.py`` (where a command runs:
``--scheduler auto|sync|local|ADDRESS``, TLS), ``_params.py`` (estimator parameters as flags and TOML
config keys), ``_data.py`` (ingest, info), ``_model.py`` (train, evaluate, predict),
``_post.py`` (compress, report), ``_demo.py``.

Expected errors (bad input, existing or missing paths, damaged stores, unreachable schedulers)
are printed as one ``Error: ...`` line with exit status 1; ``kmp-dask --traceback ...`` shows
the full Python traceback instead. Anything else (a bug) keeps its traceback.
"""

from . import _data, _demo, _model, _post, _run  # noqa: F401  (register the commands)
from ._main import is_expected_error, main, one_line_message

__all__ = ["main", "is_expected_error", "one_line_message"]
