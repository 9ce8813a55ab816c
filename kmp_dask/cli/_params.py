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


def _doc_help(cls) -> dict[str, str]:
    """Each parameter's type line and the first sentence of its numpydoc description."""
    doc = inspect.getdoc(cls) or ""
    types, texts, name = {}, {}, None
    for line in doc.splitlines():
        m = re.match(r"^(\w+) : (.*)$", line)
        if m:
            name = m.group(1)
            types[name], texts[name] = m.group(2).strip(), []
        elif name and line.startswith("    ") and texts[name] is not None:
            texts[name].append(line.strip())
        elif name and not line.strip():
            name = None
    out = {}
    for n, t in types.items():
        para = " ".join(texts[n] or [])
        first = re.split(r"(?<=[.;])\s+(?=[A-Z(])", para)[0] if para else ""
        out[n] = f"({t}) {first}".strip()
    return out


def all_param_flags():
    """(parameter, help) for every parameter of every algorithm's estimators, in a stable order."""
    seen: dict[str, str] = {}
    for names in ALGORITHMS.values():
        for cname in names:
            if cname is None:
                continue
            cls = estimator_class(cname)
            helps = _doc_help(cls)
            for p in param_names(cls):
                if not seen.get(p):
                    seen[p] = helps.get(p, "")
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
    check_before_cluster(cls, params)
    return params


def check_before_cluster(cls, params: dict) -> None:
    """The parameter checks a fit would make, made now — before any cluster starts — for the
    estimators that have them as a separate step (KMP): a bad value costs no cluster start."""
    from ..estimators._kmp import _BaseKMP, _check_params

    if isinstance(cls, type) and issubclass(cls, _BaseKMP):
        _check_params(cls(**params))
