"""Reduced-set compression of fitted kernel models (Weston & Bakır).

:func:`as_compression_target` turns a fitted model (scikit-learn SVC/NuSVC/SVR/NuSVR/KernelRidge,
kmp_dask's KMP estimators, or a :class:`~kmp_dask.KernelExpansion`) into a
:class:`CompressionTarget`: its hyperplanes as one kernel expansion plus its prediction rule.
"""

from ._models import CompressionTarget, as_compression_target

__all__ = ["CompressionTarget", "as_compression_target"]
