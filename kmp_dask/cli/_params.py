"""Estimator parameters on the command line: one flag per parameter, or keys of a TOML file.

``train --algorithm A`` builds one estimator; its parameters come from ``--config FILE`` (a flat
TOML table of parameter names, optionally with ``algorithm = "..."``), then from flags, which
win. The flags are generated from the estimators' own ``__init__`` signatures (``n_basis`` →
``--n-basis``) with help taken from their numpydoc ``Parameters`` sections, so a new
estimator parameter is a new flag without editing the CLI. A flag or key that the chosen
algorithm does not have is an error naming it and listing the ones it has.

Values on the command line are parsed as JSON when they parse (``0.5``, ``100``, ``true``,
``null``, ``[0.1, 1.0]``), as a comma list when they contain commas (``0.1,1,10``), else kept
as strings (``auto``, ``rbf``). ``client`` and ``verbose`` are not parameters here: where a
command runs and how it reports progress have their own options.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import tomllib
from pathlib import Path

import click

from ..pipeline._spec import ALGORITHMS, estimator_class  # noqa: E402  (one table for CLI and pipelines)

#: Parameters the CLI sets itself.
RESERVED = ("client", "verbose")


def class_for(algorithm: str, task: str):
    """The estimator class of ``algorithm`` for a store whose task is ``task``."""
    from ..pipeline._spec import class_for as _class_for

    try:
        return _class_for(algorithm, task)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def param_names(cls) -> list[str]:
    return [p for p in inspect.signature(cls.__init__).parameters if p != "self" and p not in RESERVED]


_ROLE = re.compile(r":\w+:`~?([^`]+)`")
_NAMES = re.compile(r"^(\w+(?:, \w+)*)(?: : (.*))?$")
#: Help for parameters whose docstring entry has no description.
FALLBACK_HELP = {"C": "Penalty of training errors, as scikit-learn SVC's C (larger: fewer errors, more core vectors).",
                 "max_core": "Most core vectors per binary problem: its fit stops there (stop_reason_ 'max_core')."}
HELP_CHARS = 240
"""A flag's help: whole sentences of its parameter's first paragraph, up to about this many
characters (never a sentence cut in the middle)."""


def _plain(text: str) -> str:
    """numpydoc/RST text as plain text: roles as their last name, no double backquotes."""
    text = _ROLE.sub(lambda m: m.group(1).split(".")[-1], text)
    return " ".join(text.replace("``", "").split())


def _parameters_section(doc: str) -> list[str]:
    lines = doc.splitlines()
    for k in range(len(lines) - 1):
        if lines[k].strip() == "Parameters" and set(lines[k + 1].strip()) == {"-"}:
            out = []
            for m, line in enumerate(lines[k + 2:]):
                nxt = lines[k + 3 + m] if k + 3 + m < len(lines) else ""
                if line.strip() and not line.startswith(" ") and nxt.strip() and set(nxt.strip()) == {"-"}:
                    break  # the next section's title
                out.append(line)
            return out
    return []


def _summary(lines: list[str]) -> str:
    """Whole sentences of the first paragraph (:data:`HELP_CHARS`); a paragraph that introduces a
    list (ends with ':') ends with the list's quoted values instead."""
    para, rest = [], []
    for n, line in enumerate(lines):
        if not line.strip():
            rest = lines[n + 1:]
            break
        para.append(line.strip())
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z(\"'])", _plain(" ".join(para)))
    text = sentences[0] if sentences else ""
    for more in sentences[1:]:
        if len(text) + 1 + len(more) > HELP_CHARS:
            break
        text += " " + more
    if text.endswith(":"):
        items = [m.group(1) for line in rest if (m := re.match(r'^\s*- ``("?[\w.-]+"?)``', line))]
        text = text[:-1] + (": " + ", ".join(items[:-1]) + " or " + items[-1] + "." if len(items) > 1 else ".")
    return text


@functools.cache
def _doc_help(cls) -> dict[str, str]:
    """Each parameter's type and the first sentences of its numpydoc description (``a, b : type``
    entries give both names the text; "As for KMPClassifier" takes KMPClassifier's)."""
    entries, current = [], None
    for line in _parameters_section(inspect.getdoc(cls) or ""):
        m = _NAMES.match(line) if line and not line.startswith(" ") else None
        if m:
            names, kind = [n.strip() for n in m.group(1).split(",")], (m.group(2) or "").strip()
            head, _, more = kind.rpartition("; ")
            if head and re.fullmatch(r"\w+(?:, \w+)*", more):  # "kernel : str; gamma, kernel_params":
                kind = head  # the names after ';' are KMPClassifier's parameters of the same name
                entries.append(([n.strip() for n in more.split(",")], "", ["As for KMPClassifier."]))
            current = (names, kind, [])
            entries.append(current)
        elif current is not None:
            current[2].append(line)
    out = {}
    for names, kind, body in entries:
        text = _summary(body) or FALLBACK_HELP.get(names[0], "")
        other = re.match(r"As for (\w+)\b", text)
        for n in names:
            t = text
            if other and other.group(1) != cls.__name__:  # "As for KMPClassifier": that class's text
                t = _doc_help(estimator_class(other.group(1))).get(n) or text
            out[n] = f"({_plain(kind)}) {t}".strip() if kind and not t.startswith("(") else t
    return out


def algorithm_classes(algorithm: str) -> list:
    """The estimator classes ``--algorithm`` may build (classifier, regressor)."""
    return [estimator_class(c) for c in dict.fromkeys(ALGORITHMS[algorithm]) if c is not None]


def param_flags(algorithm: str) -> list[tuple[str, str]]:
    """(parameter, help) of ``algorithm``'s estimators (classifier first), sorted by name."""
    seen: dict[str, str] = {}
    for cls in algorithm_classes(algorithm):
        helps = _doc_help(cls)
        for p in param_names(cls):
            if not seen.get(p):
                seen[p] = helps.get(p, "")
    return sorted(seen.items())


def all_param_flags():
    """(parameter, help) for every parameter of every algorithm's estimators, in a stable order."""
    seen: dict[str, str] = {}
    for algorithm in ALGORITHMS:
        for p, text in param_flags(algorithm):
            if not seen.get(p):
                seen[p] = text
    return sorted(seen.items())


def parse_value(text: str):
    """A flag's text as a Python value (see the module docstring)."""
    low = text.strip()
    if low.lower() in ("none", "null"):
        return None
    if low.lower() in ("true", "false"):
        return low.lower() == "true"
    try:
        return json.loads(low)
    except ValueError:
        pass
    if "," in low:
        return [parse_value(part) for part in low.split(",") if part.strip()]
    return low


def candidates_value(text, hint: str = "--candidates"):
    """``--candidates`` as every estimator takes it (docs/names.md): "all", "auto" or an int,
    refused with a click error naming the option before any cluster starts."""
    from ..greedy._sampling import resolve_candidates

    value = parse_value(str(text))
    try:
        resolve_candidates(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=hint) from None
    return value


def read_config(path) -> dict:
    """The TOML file at ``path`` as a flat dict (one clear error when it is not readable)."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise click.BadParameter(f"no config file at {str(p)!r}", param_hint="--config") from None
    except tomllib.TOMLDecodeError as exc:
        raise click.BadParameter(f"{str(p)!r} is not valid TOML: {exc}", param_hint="--config") from None
    nested = [k for k, v in data.items() if isinstance(v, dict) and k != "loss_params" and k != "kernel_params"]
    if nested:
        raise click.BadParameter(f"{str(p)!r}: tables are not supported ([{nested[0]}]); write parameters as "
                                 "top-level keys, e.g. n_basis = 200", param_hint="--config")
    return data


def build_params(cls, config: dict, flags: dict, *, config_name: str | None) -> dict:
    """Parameters for ``cls``: config keys, then flags; any name ``cls`` lacks is an error."""
    known = set(param_names(cls))
    for source, values in (("config key", config), ("option", flags)):
        unknown = sorted(set(values) - known)
        if unknown:
            shown = unknown[0] if source == "config key" else "--" + unknown[0].replace("_", "-")
            where = f" in {config_name}" if source == "config key" and config_name else ""
            raise click.UsageError(
                f"unknown {source} {shown!r}{where}: {cls.__name__} has no parameter {unknown[0]!r}; "
                f"its parameters are {', '.join(sorted(known))}")
    params = {**config, **flags}
    if isinstance(params.get("standardize"), str) and params["standardize"].lower() in YES_NO:
        params["standardize"] = YES_NO[params["standardize"].lower()]  # --standardize yes / no
    check_before_cluster(cls, params)
    return params


#: ``--standardize yes|no`` (and ``standardize = "yes"`` in a config or pipeline) as the estimators' True / False.
YES_NO = {"yes": True, "no": False}


def check_before_cluster(cls, params: dict) -> None:
    """The parameter checks a fit would make, made now — before any cluster starts: KMP's own
    parameter check, and for every algorithm the kernel (its name, ``gamma``, ``degree``,
    ``coef0``), so a bad value costs no cluster start."""
    from ..estimators._kmp import _BaseKMP, _check_params
    from ..estimators._scale import check_standardize

    if "standardize" in params:
        check_standardize(params["standardize"])
    if "kernel" in param_names(cls):
        check_kernel(params)  # first: its errors name the flag (--gamma, --kernel)
    if isinstance(cls, type) and issubclass(cls, _BaseKMP):
        _check_params(cls(**params))
    _check_cvm(cls, params)


def _check_cvm(cls, params: dict) -> None:
    """CVM / MMDA: their own parameter check, and a kernel with constant k(x, x) (probed on a few
    random rows, as the fit probes the data's), before any cluster starts."""
    import numpy as np

    from ..estimators._cvm import _constant_diagonal, _CVMBase
    from ..kernels import get_kernel

    if not (isinstance(cls, type) and issubclass(cls, _CVMBase)):
        return
    est = cls(**params)
    est._check_params()
    gamma = params.get("gamma")
    kernel = params.get("kernel", "rbf")
    if isinstance(kernel, str):
        extra = {k: params[k] for k in ("kernel_params",) if params.get(k) is not None}
        k = get_kernel(kernel, gamma=None if isinstance(gamma, str) else gamma, n_features=3,
                       **extra.get("kernel_params", {}))
        _constant_diagonal(k, np.random.default_rng(0).normal(size=(8, 3)))


#: String values of ``gamma`` left to the estimator (scikit-learn's vocabulary): any other string is refused.
GAMMA_WORDS = ("scale", "auto")


def check_kernel(params: dict) -> None:
    """``kernel`` / ``gamma`` (and ``degree``, ``coef0``, ``kernel_params``) as the fit will read
    them: a click error naming the flag, the value and what to give instead."""
    from ..kernels import get_kernel

    kernels = params.get("kernel", "rbf")
    kernels = kernels if isinstance(kernels, (list, tuple)) else [kernels]
    gammas = params.get("gamma")
    gammas = gammas if isinstance(gammas, (list, tuple)) else [gammas]
    for g in gammas:
        if isinstance(g, str) and g not in GAMMA_WORDS:
            raise click.BadParameter(f"{g!r} is not a number: give a positive number (e.g. 0.5), a comma list of "
                                     "them (0.1,1,10), or leave --gamma out for the default", param_hint="--gamma")
    extra = {k: params[k] for k in ("degree", "coef0", "kernel_params") if k in params}
    for k in kernels:
        if not isinstance(k, str):
            continue
        for g in gammas:
            try:
                get_kernel(k, gamma=None if isinstance(g, str) else g, n_features=1, **extra)
            except (ValueError, TypeError, KeyError) as exc:
                hint = "--gamma" if "gamma" in str(exc) else "--kernel"
                raise click.BadParameter(" ".join(str(exc).split()), param_hint=hint) from None
