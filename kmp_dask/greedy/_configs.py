"""One way every driver takes its configuration: built whole by the caller (an estimator builds its
family's frozen config and hands it over), or from the driver's keywords — one place that refuses a
mixture, an unknown keyword or a missing one, before any pass. The config's own ``__post_init__``
then validates the values (the one place for them)."""

from __future__ import annotations

from dataclasses import MISSING, fields

__all__ = ["config_given"]


def config_given(cls, config, keywords: dict, *, owner: str, renames: dict | None = None, fixed: dict | None = None):
    """``config`` (an instance of the frozen dataclass ``cls``), or ``cls`` built from ``keywords``
    (``renames``: keyword name -> field name, e.g. ``kernel`` -> ``kernels``; ``fixed``: fields the
    driver sets itself, e.g. the pool size from the rows it was given, which no keyword may name); a
    ValueError naming the arguments when both are given, a keyword is unknown or one is missing."""
    renames, fixed = renames or {}, fixed or {}
    if config is not None:
        if not isinstance(config, cls):
            raise ValueError(f"{owner}: config must be a {cls.__name__}; got {type(config).__name__}")
        if keywords:
            raise ValueError(f"{owner}: pass either config= (a {cls.__name__}) or {sorted(keywords)}, not both")
        return config
    back = {v: k for k, v in renames.items()}
    kw = {renames.get(k, k): v for k, v in keywords.items()}
    names = [f.name for f in fields(cls) if f.name not in fixed]
    unknown = sorted(back.get(k, k) for k in set(kw) - set(names))
    if unknown:
        raise ValueError(f"{owner} got unknown keyword(s) {unknown}; accepted: {[back.get(n, n) for n in names]} "
                         f"(or config=, a {cls.__name__})")
    kw.update(fixed)
    missing = [back.get(f.name, f.name) for f in fields(cls)
               if f.default is MISSING and f.default_factory is MISSING and f.name not in kw]
    if missing:
        raise ValueError(f"{owner} needs {' and '.join(m + '=' for m in missing)} (or config=, a {cls.__name__})")
    return cls(**kw)
