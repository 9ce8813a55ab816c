"""Kernel block functions, the :class:`Kernel` value object and its registry.

Pure NumPy (and SciPy for L1 distances): no dask, no scikit-learn. Block
functions take one chunk ``X`` and a basis ``Y`` and return ``K(X, Y)`` in the
floating dtype of the inputs.
"""

from ._base import Kernel, get_kernel, shared_blocks
from ._laplacian import laplacian
from ._linear import linear
from ._polynomial import polynomial, sigmoid
from ._rbf import rbf, rbf_multi
from ._registry import KERNELS, KernelSpec, register_kernel

__all__ = [
    "KERNELS",
    "Kernel",
    "KernelSpec",
    "get_kernel",
    "laplacian",
    "linear",
    "polynomial",
    "rbf",
    "rbf_multi",
    "register_kernel",
    "shared_blocks",
    "sigmoid",
]
