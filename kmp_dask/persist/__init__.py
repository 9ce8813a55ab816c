"""The open model format: ``save(model, path)``, ``load(path)``, ``model_info(path)``.

JSON metadata plus ``.npy`` arrays in a directory; no pickle, no dask needed to load
(docs/models.md has the layout, the format-version policy and why not skops).
"""

from ._checks import ModelFileError
from ._io import FORMAT, FORMAT_VERSION, load, model_info, save

__all__ = ["save", "load", "model_info", "FORMAT", "FORMAT_VERSION", "ModelFileError"]
