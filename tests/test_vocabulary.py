"""One vocabulary (docs/names.md): the same name means the same idea in every estimator, the CLI
sets parameters under their own names, ``candidates`` takes "all", "auto" and an int with one
meaning everywhere, and every estimator that samples takes ``random_state``.

The glossary these tests hold the code to is ``GLOSSARY`` / ``SYNONYMS`` / ``CLI_RENAMES`` in
benchmarks/names_audit.py (rendered into docs/names.md); the oracle of the behavioural checks is
the estimator itself fitted with the other spelling of the same value (an exact equality of
every fitted array and output), so a spelling that changed meaning fails.
"""

from __future__ import annotations

import inspect
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import names_audit as NA

CLASSES = NA._classes()
GLOSSARY = {i.name: i for i in NA.GLOSSARY}
#: Parameters whose presence means the fit draws random numbers.
SAMPLING_PARAMS = ("candidates", "validation_fraction", "cv")
RANDOM_WORDS = ("check_random_state", "default_rng", "RandomState", "random_state")


def _occurrences():
    """name -> [(class name, Entry or None)] over every public estimator's parameters."""
    occ = defaultdict(list)
    for cname, cls in CLASSES.items():
        docs = NA.doc_entries(cls)
        for p in NA.signature_params(cls):
            occ[p].append((cname, docs.get(p)))
    return occ


def test_every_parameter_is_documented():
    missing = [f"{c}.{p}" for p, occ in _occurrences().items() for c, e in occ if e is None or not e.text]
    assert not missing, f"parameters without a numpydoc entry (Parameters section or 'As for X'): {missing}"


def shared_name_problems(occurrences, glossary) -> list[str]:
    """(a) A name shared by estimators must have one meaning: one type line (or only type lines
    the glossary allows), and the words the glossary says each occurrence's text contains."""
    problems = []
    for name, occ in sorted(occurrences.items()):
        idea = glossary.get(name)
        if len(occ) < 2 and idea is None:
            continue
        typed = {c: e.type for c, e in occ if e is not None}
        untyped = [c for c, e in occ if e is not None and not e.type]
        if untyped and len(occ) > 1:
            problems.append(f"{name}: no type line in {untyped} (shared with {[c for c, _ in occ]})")
        kinds = {t for t in typed.values() if t}
        allowed = set(idea.types) if idea and idea.types else None
        if allowed is not None and kinds - allowed:
            problems.append(f"{name}: type lines {sorted(kinds - allowed)} are not the glossary's {sorted(allowed)}")
        elif allowed is None and len(kinds) > 1:
            problems.append(f"{name}: type lines differ between estimators {typed}; align them or declare the "
                            "name in GLOSSARY")
        for c, e in occ:
            if idea is None or not idea.must_say or e is None:
                continue
            words = idea.must_say.get(c, idea.must_say.get("*"))
            if words is None:
                problems.append(f"{name}: {c} has it but the glossary declares no meaning for {c}")
            elif words not in e.text:
                problems.append(f"{name}: {c}'s description does not say {words!r} (the glossary's meaning): "
                                f"{e.text!r}")
    return problems


def test_shared_names_have_one_meaning():
    assert shared_name_problems(_occurrences(), GLOSSARY) == []


def test_shared_name_check_fails_on_a_broken_copy():
    """The check is able to fail: a copy with eps described as a tolerance, a second type line for
    random_state and a shared name without a type line."""
    occ = _occurrences()
    broken = {k: list(v) for k, v in occ.items()}
    c, e = broken["eps"][0]
    broken["eps"][0] = (c, NA.Entry(e.type, e.default, "Stop when the residual falls below eps.", e.source))
    c, e = broken["random_state"][0]
    broken["random_state"][0] = (c, NA.Entry("int or None", e.default, e.text, e.source))
    c, e = broken["verbose"][0]
    broken["verbose"][0] = (c, NA.Entry("", e.default, e.text, e.source))
    broken["eps"].append(("NewEstimator", e))
    problems = " | ".join(shared_name_problems(broken, GLOSSARY))
    for expected in ("eps: KMP", "eps: NewEstimator has it", "random_state: type lines", "verbose: no type line"):
        assert expected in problems, problems


def test_no_synonyms_for_glossary_ideas():
    names = {p for cls in CLASSES.values() for p in NA.signature_params(cls)}
    names |= {r[0] for r in NA.cli_rows() if r[5] or r[1].startswith("train")}
    declared = {o for (_, o) in NA.CLI_RENAMES}
    used = sorted((n, NA.SYNONYMS[n]) for n in names if n in NA.SYNONYMS and n not in declared)
    assert not used, f"synonyms of glossary names (use the glossary's name): {used}"


def test_driver_synonyms_are_declared():
    """The functional entry points may use a synonym only with a declared reason (DRIVER_RENAMES)."""
    used = sorted({(n, where) for n, where, _ in NA.function_rows() if n in NA.SYNONYMS and n not in NA.DRIVER_RENAMES})
    assert not used, f"driver parameters named with a synonym of a glossary name (rename or declare): {used}"


# --- (b) candidates -------------------------------------------------------------------------------

def _data(kind="clf", n=48, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] + 0.4 * X[:, 1] ** 2 > 0.3).astype(int) if kind == "clf" else np.sin(X[:, 0]) + 0.1 * X[:, 1]
    return X, y


def _fit(cname, **params):
    """A small fit of ``cname`` (numpy rows, in this process) and its outputs on the training rows."""
    from sklearn.svm import SVC

    cls = CLASSES[cname]
    X, y = _data("reg" if cname.endswith(("Regressor", "RegressorCV")) else "clf", n=160)  # n > 59: "auto" draws
    base = {"KMPClassifier": {"n_basis": 6, "gamma": 0.5}, "KMPRegressor": {"n_basis": 6, "gamma": 0.5},
            "KMPClassifierCV": {"gammas": [0.5], "n_basis": 4, "cv": 2},
            "KMPRegressorCV": {"gammas": [0.5], "n_basis": 4, "cv": 2},
            "CVMClassifier": {"gamma": 0.5}, "MMDA": {"n_components": 2, "gamma": 0.5},
            "SparseKernelPCA": {"n_components": 4, "gamma": 0.5},
            "SparseKCCA": {"n_components": 3, "gamma_x": 0.5, "gamma_y": 0.5},
            "ReducedSetCompressor": {"n_vectors": 4}, "ReducedSetClassifier": {"n_vectors": 4},
            "ReducedSetRegressor": {"n_vectors": 4}}[cname]
    est = cls(**base, **params)
    if cname == "SparseKCCA":
        est.fit(X[:, :2], X[:, 1:])
        return est, est.transform(X[:, :2], X[:, 1:])
    if cname == "SparseKernelPCA":
        return est, est.fit(X).transform(X)
    if cname == "ReducedSetCompressor":
        est.fit(SVC(gamma=0.5).fit(X, y), X, y)
        return est, est.decision_function(X)
    est.fit(X, y)
    return est, (getattr(est, "decision_function", getattr(est, "predict", None))(X) if cname != "MMDA"
                 else est.transform(X))


def _fitted(est, out) -> dict:
    arrays = {k: v for k, v in vars(est).items() if k.endswith("_") and isinstance(v, np.ndarray)}
    return {"__out__": np.asarray(out), **arrays}


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


CANDIDATE_CLASSES = sorted(c for c, cls in CLASSES.items() if "candidates" in NA.signature_params(cls))


def test_candidates_type_line_is_the_vocabulary():
    wrong = {c: NA.doc_entries(CLASSES[c])["candidates"].type for c in CANDIDATE_CLASSES
             if NA.doc_entries(CLASSES[c])["candidates"].type != GLOSSARY["candidates"].types[0]}
    assert not wrong, wrong


@pytest.mark.parametrize("cname", CANDIDATE_CLASSES)
def test_candidates_all_auto_int_one_meaning(cname):
    """"all" is None (every row), "auto" is the int 59 (⌈log 0.05 / log 0.95⌉, KMP's from its
    defaults eps=0.05, q=0.95): each pair gives the same model, to the bit."""
    from kmp_dask.greedy import n_candidates_for

    s = n_candidates_for(0.05, 0.95)
    fits = {v: _fitted(*_fit(cname, candidates=v, random_state=0)) for v in ("all", None, "auto", s, 5)}
    assert _same(fits["all"], fits[None])
    assert _same(fits["auto"], fits[s])
    assert fits[5]["__out__"].shape == fits["all"]["__out__"].shape


@pytest.mark.parametrize("cname", CANDIDATE_CLASSES)
@pytest.mark.parametrize("bad", [0, -2, True, 2.5, "some"])
def test_candidates_refuses_other_values_naming_the_argument(cname, bad):
    with pytest.raises(ValueError, match=r"candidates must be 'all'.*got") as info:
        _fit(cname, candidates=bad)
    assert repr(bad) in str(info.value) or str(bad) in str(info.value)


def test_resolve_candidates():
    """The one resolution every estimator calls: "all" and None are every row, "auto" the s of
    (eps, q), an int itself; anything else (a case-changed word included) is refused."""
    from kmp_dask.greedy._sampling import resolve_candidates

    assert resolve_candidates("all") is None and resolve_candidates(None) is None
    assert resolve_candidates("auto") == 59 and resolve_candidates("auto", eps=0.01, q=0.98) == 228
    assert resolve_candidates(7) == 7 and resolve_candidates(np.int64(3)) == 3
    for bad in (0, -1, True, 2.5, "some", "ALL"):
        with pytest.raises(ValueError, match=r"candidates must be 'all'.*got"):
            resolve_candidates(bad)


# --- (c) random_state -----------------------------------------------------------------------------

def _samples(cls) -> bool:
    params = NA.signature_params(cls)
    source = "".join(inspect.getsource(inspect.getmodule(k)) for k in cls.__mro__
                     if k.__module__.startswith("kmp_dask"))
    return any(p in params for p in SAMPLING_PARAMS) or any(w in source for w in RANDOM_WORDS)


def lacking_random_state(classes: dict) -> list[str]:
    """(c) Estimators that draw random numbers but take no ``random_state``."""
    return [c for c, cls in classes.items() if _samples(cls) and "random_state" not in NA.signature_params(cls)]


def test_every_estimator_that_samples_takes_random_state():
    lacking = lacking_random_state(CLASSES)
    assert not lacking, f"estimators that draw random numbers without a random_state parameter: {lacking}"


class _SamplesWithoutSeed:
    """A broken copy: candidates (random draws) but no random_state."""

    def __init__(self, n_basis=5, candidates="auto"):
        self.n_basis, self.candidates = n_basis, candidates


def test_random_state_check_fails_on_a_broken_copy():
    assert lacking_random_state({"Broken": _SamplesWithoutSeed,
                                 "KMPClassifier": CLASSES["KMPClassifier"]}) == ["Broken"]


@pytest.mark.parametrize("cname", CANDIDATE_CLASSES)
def test_random_state_takes_an_int_or_a_random_state(cname):
    """The glossary's type line: an int and ``RandomState(int)`` seed the same draws."""
    a = _fitted(*_fit(cname, candidates=5, random_state=3))
    b = _fitted(*_fit(cname, candidates=5, random_state=np.random.RandomState(3)))
    assert _same(a, b)


# --- (d) CLI options and pipeline keys ------------------------------------------------------------

def test_train_flags_are_the_estimators_parameters():
    from kmp_dask.cli._params import RESERVED, algorithm_classes, param_flags
    from kmp_dask.pipeline._spec import ALGORITHMS

    for algo in ALGORITHMS:
        expected = {p for cls in algorithm_classes(algo) for p in NA.signature_params(cls)} - set(RESERVED)
        assert {n for n, _ in param_flags(algo)} == expected, algo


def cli_problems(command: str, keyword_sources: dict, options: set, params: set) -> list[str]:
    """(d) A builder command's options either set the estimator parameter of the same name, are
    the command's own (where to read/write/run), or are a declared rename; each keyword of the
    construction is computed from its own option (or a declared rename)."""
    from kmp_dask.cli._params import RESERVED

    own = NA.CLI_COMMAND_OPTIONS[command]
    problems = [f"{command} --{o}: sets no parameter of that name and is neither declared a command option nor "
                "a rename" for o in sorted(options - own - params - {o for (c, o) in NA.CLI_RENAMES if c == command})]
    for kw, sources in sorted(keyword_sources.items()):
        for s in sorted(sources - own):
            if s != kw and kw not in RESERVED and NA.CLI_RENAMES.get((command, s), (None,))[0] != kw:
                problems.append(f"{command}: option --{s} sets parameter {kw!r} under another name without a declared "
                                "reason (CLI_RENAMES)")
    return problems


@pytest.mark.parametrize("command", sorted(NA.CLI_BUILDERS))
def test_cli_options_set_parameters_of_their_own_name(command):
    import click

    cmd = dict(NA.cli_commands())[command]
    options = {p.name for p in cmd.params if isinstance(p, click.Option)}
    params = set(NA.signature_params(CLASSES[NA.CLI_BUILDERS[command][2]]))
    assert cli_problems(command, NA.cli_keyword_sources(command), options, params) == []


def test_cli_check_fails_on_a_broken_copy():
    """The check is able to fail: an option --n-vec setting n_vectors, and --seed setting
    random_state in compress (declared only for demo)."""
    sources = dict(NA.cli_keyword_sources("compress"))
    sources["n_vectors"] = {"n_vec"}
    sources["random_state"] = {"seed"}
    params = set(NA.signature_params(CLASSES["ReducedSetCompressor"]))
    problems = " | ".join(cli_problems("compress", sources, {"n_vec", "seed", "method"}, params))
    assert "--n_vec sets parameter 'n_vectors'" in problems and "--seed sets parameter 'random_state'" in problems
    assert "compress --n_vec: sets no parameter" in problems


def test_pipeline_compress_keys_are_compressor_parameters():
    from kmp_dask.pipeline._spec import COMPRESS_KEYS

    params = set(NA.signature_params(CLASSES["ReducedSetCompressor"]))
    step = {"data", "params", "checkpoint_every"}  # where the pool comes from, further parameters, checkpoints
    assert COMPRESS_KEYS - step <= params, COMPRESS_KEYS - step - params


@pytest.mark.parametrize("text, value", [("all", "all"), ("auto", "auto"), ("7", 7), ("none", None)])
def test_cli_candidates_take_the_vocabulary(text, value):
    from kmp_dask.cli._params import candidates_value

    assert candidates_value(text) == value


def test_cli_compress_candidates_spellings(tmp_path):
    """``compress --candidates auto`` and ``59`` save the same model; a value outside the
    vocabulary is a usage error naming the option, before anything is written."""
    import joblib
    from click.testing import CliRunner
    from sklearn.svm import SVC

    from kmp_dask import load
    from kmp_dask.cli import main

    X, y = _data(n=120)
    joblib.dump(SVC(gamma=0.5).fit(X, y), tmp_path / "svc.joblib")
    base = ["compress", str(tmp_path / "svc.joblib"), "--trust-pickle", "--n-vectors", "6", "--quiet",
            "--scheduler", "sync", "--random-state", "1"]
    out = {}
    for text in ("auto", "59", "1.5"):
        r = CliRunner().invoke(main, [*base, "--candidates", text, "--model", str(tmp_path / f"{text}.kmp")])
        if text == "1.5":
            assert r.exit_code == 2 and "--candidates" in r.output and "1.5" in r.output, r.output
            assert not (tmp_path / f"{text}.kmp").exists()
            continue
        assert r.exit_code == 0, r.output
        m = load(tmp_path / f"{text}.kmp")
        out[text] = (m.n_vectors_, m.decision_function(X))
    assert all(np.array_equal(a, b) for a, b in zip(out["auto"], out["59"], strict=True))


def test_docs_names_glossary_is_the_audits():
    """docs/names.md's glossary is the one these tests use (regenerate: benchmarks/names_audit.py --write)."""
    text = (Path(NA.ROOT) / "docs" / "names.md").read_text()
    assert NA.glossary_markdown() in text
