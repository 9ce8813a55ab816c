"""The one merge of the partitions' best candidates (CVM's furthest rows, HMP's best scores)."""

from __future__ import annotations

import numpy as np
import pytest

from kmp_dask.greedy._candidates import merge_ranked
from kmp_dask.greedy._result import StopReason


def _split(cand, cuts):
    """The candidates as partitions would return them: consecutive row ranges, each its own dict."""
    bounds = [0, *cuts, len(cand["index"])]
    return [{k: v[a:b] for k, v in cand.items()} for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


@pytest.mark.parametrize("cuts", [[], [3], [2, 2, 7], [0, 5, 11]])
def test_merge_is_a_sort_by_score_then_row_whatever_the_partitions(cuts):
    rng = np.random.default_rng(1)
    n = 11
    cand = {"index": rng.permutation(100)[:n].astype(np.int64),
            "score": np.round(rng.normal(size=n), 1),  # ties: broken by the lowest row
            "rows": rng.normal(size=(n, 3))}
    cand["score"][[2, 5, 9]] = cand["score"].max()
    got = merge_ranked(_split(cand, cuts), ("index", "score", "rows"), by="score")
    # oracle: Python's sort of (−score, row) over the unsplit candidates
    order = sorted(range(n), key=lambda i: (-cand["score"][i], cand["index"][i]))
    np.testing.assert_array_equal(got["index"], cand["index"][order])
    np.testing.assert_array_equal(got["rows"], cand["rows"][order])
    assert got["index"][0] == min(cand["index"][[2, 5, 9]])


def test_merge_of_empty_partitions_is_none():
    empty = {"index": np.zeros(0, dtype=np.int64), "dist": np.zeros(0)}
    assert merge_ranked([empty, empty], ("index", "dist"), by="dist") is None


def test_stop_reasons_of_every_family_are_distinct_strings():
    values = [r.value for r in StopReason]
    assert len(set(values)) == len(values)
    for name in ("converged", "max_core", "n_components", "rank", "bound", "n_vectors", "rkhs_tol", "max_iter",
                 "linear_dependence", "exhausted"):
        assert StopReason(name) == name


def test_estimators_keep_plain_string_stop_reasons():
    """The loops speak StopReason; what estimators expose stays the plain string (its value)."""
    from sklearn.datasets import make_classification
    from sklearn.svm import SVC

    from kmp_dask import CVMClassifier, ReducedSetCompressor, SparseKernelPCA

    X, y = make_classification(n_samples=120, n_features=4, random_state=0)
    kpca = SparseKernelPCA(n_components=3, gamma=0.3, random_state=0).fit(X)
    cvm = CVMClassifier(gamma=0.3, random_state=0).fit(X, y)
    rs = ReducedSetCompressor(4, random_state=0).fit(SVC(gamma=0.3).fit(X, y), X, y)
    for value, expected in ((kpca.stop_reason_, "n_components"), (cvm.stop_reason_[0], "converged"),
                            (rs.stop_reason_, "n_vectors")):
        assert type(value) is str and value == expected
