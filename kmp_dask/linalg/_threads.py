"""One BLAS thread around the driver's small dense linear algebra.

The drivers' solves, Cholesky updates and rank-one updates are basis-sized (tens to hundreds of
rows); OpenBLAS's default threads (one per core) gain nothing on them and, on a busy machine,
wait for each other on every call: ``benchmarks/blas_threads.py`` measured default threads
several times slower than one thread for in-process KMP fits on a loaded 2-core machine
(docs/engine.md, "Threads"). Models do not depend on it: one thread or several give the same
fitted attributes (``benchmarks/notes/blas_threads.md``).
"""

from __future__ import annotations

__all__ = ["one_blas_thread"]

_CONTROLLER = None


def _controller():
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()  # inspects the loaded libraries once (~ms)
    return _CONTROLLER


def one_blas_thread():
    """A context in which BLAS (OpenBLAS, MKL, BLIS) runs on one thread; the previous thread
    counts are restored on exit (``threadpoolctl`` limits: for the calling thread's BLAS calls;
    how far they reach into other threads depends on the BLAS build). Entering costs ~0.1 ms:
    use it around a loop, not around each solve."""
    return _controller().limit(limits=1, user_api="blas")
