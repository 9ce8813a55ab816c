"""Kernel block functions, the :class:`Kernel` value object and its registry.

Pure NumPy (and SciPy for L1 distances): no dask, no scikit-learn. Block
functions take one chunk ``X`` and a basis ``Y`` and return ``K(X, Y)`` in the
floating dtype of the inputs.
"""

from ._base import Kernel, get_kernel, kernel_spec, shared_blocks
from ._laplacian import laplacian
from ._linear import linear
from ._polynomial import polynomial, sigmoid
from ._rbf import rbf, rbf_multi
from ._registry import KERNELS, WIDTH_GRID, KernelSpec, libsvm_names, pairwise_names, register_kernel

__all__ = [
    "KERNELS",
    "Kernel",
    "KernelSpec",
    "WIDTH_GRID",
    "get_kernel",
    "kernel_spec",
    "laplacian",
    "libsvm_names",
    "linear",
    "pairwise_names",
    "polynomial",
    "rbf",
    "rbf_multi",
    "register_kernel",
    "shared_blocks",
    "sigmoid",
]
