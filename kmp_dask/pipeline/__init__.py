"""Declarative pipelines (``kmp-dask run PIPELINE.toml``): data → model → compress / features →
evaluate → report in one run directory, resumable. Format: docs/pipelines.md; examples: pipelines/."""

from ._runner import RunDirectory, run_pipeline
from ._spec import SpecError, load_spec

__all__ = ["load_spec", "run_pipeline", "RunDirectory", "SpecError"]
