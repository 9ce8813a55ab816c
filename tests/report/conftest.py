"""Tiny fitted models of every family the report covers (numpy input, ≤ 300 rows, ≤ 20 basis
functions), a held-out sample, and helpers that read the report back."""

from __future__ import annotations

import base64
import re
import struct
from html.parser import HTMLParser

import numpy as np
import pytest
from sklearn.datasets import make_moons
from sklearn.svm import SVC


@pytest.fixture(scope="session")
def data():
    X, y = make_moons(400, noise=0.2, random_state=0)
    yr = np.sin(3 * X[:, 0]) + X[:, 1]
    return {"X": X[:300], "y": y[:300], "yr": yr[:300], "X_test": X[300:], "y_test": y[300:], "yr_test": yr[300:]}


@pytest.fixture(scope="session")
def fitted(data):
    """name -> fitted estimator, one per family (two KMP variants: validation split, bound stopping)."""
    from kmp_dask import (
        MMDA,
        CVMClassifier,
        KMPClassifier,
        KMPRegressor,
        ReducedSetCompressor,
        SparseKCCA,
        SparseKernelPCA,
    )
    from kmp_dask.reduced import ReducedSetClassifier, ReducedSetRegressor

    X, y, yr = data["X"], data["y"], data["yr"]
    return {
        "kmp-clf": KMPClassifier(n_basis=15, random_state=0, validation_fraction=0.2).fit(X, y),
        "kmp-reg-bound": KMPRegressor(n_basis=15, random_state=0, stopping="bound", bound_threshold=0.3).fit(X, yr),
        "cvm": CVMClassifier(random_state=0).fit(X, y),
        "mmda": MMDA(n_components=2, random_state=0).fit(X, y),
        "kpca": SparseKernelPCA(n_components="bound", max_components=15, random_state=0).fit(X),
        "kcca": SparseKCCA(n_components=4, random_state=0).fit(X, yr),
        "compressor": ReducedSetCompressor(n_vectors=15).fit(SVC(gamma=1.0).fit(X, y), X, y),
        "rs-clf": ReducedSetClassifier(n_vectors=10).fit(X, y),
        "rs-reg": ReducedSetRegressor(n_vectors=10).fit(X, yr),
    }


class Page(HTMLParser):
    """The report read back: per section (id) its h3 titles and images; every src/href."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.sections, self.images, self.urls, self.tags = {}, [], [], set()
        self._section, self._in_h3, self._h3 = None, False, []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.add(tag)
        self.urls += [v for k, v in attrs if k in ("src", "href") and v is not None]
        if tag == "section":
            self._section = a.get("id")
            self.sections[self._section] = {"h3": [], "img": []}
        elif tag == "h3":
            self._in_h3, self._h3 = True, []
        elif tag == "img":
            self.images.append(a)
            if self._section:
                self.sections[self._section]["img"].append(a)

    def handle_endtag(self, tag):
        if tag == "h3" and self._in_h3:
            self._in_h3 = False
            if self._section:
                self.sections[self._section]["h3"].append("".join(self._h3))

    def handle_data(self, data):
        if self._in_h3:
            self._h3.append(data)

    def section_titles(self, index: int) -> list[str]:
        return self.sections[f"model-{index}"]["h3"]


def png_of(src: str) -> bytes:
    m = re.fullmatch(r"data:image/png;base64,([A-Za-z0-9+/=]+)", src)
    assert m, f"not a base64 PNG data URI: {src[:60]!r}"
    return base64.b64decode(m.group(1), validate=True)


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) from the IHDR chunk, after checking the signature."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "PNG signature missing"
    assert png[12:16] == b"IHDR"
    return struct.unpack(">II", png[16:24])
