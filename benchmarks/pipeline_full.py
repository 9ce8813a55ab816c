"""Full-size run of a pipeline file through the CLI, recorded as benchmarks/results/pipeline_<name>.json.

    python benchmarks/pipeline_full.py pipelines/covertype_skmp.toml

Runs ``kmp-dask run PIPELINE --output <tmp>`` (the embedded cluster of the pipeline's [run]
table) and stores the run's summary — seconds per step, accuracy, basis size, peak RSS of the
driver and of each worker — with the per-iteration times of the fit, the wall time of the whole
command (cluster start included) and the machine it ran on.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(pipeline: str) -> Path:
    out = Path(tempfile.mkdtemp(prefix="kmp-pipeline-")) / "run"
    kmp = shutil.which("kmp-dask", path=str(Path(sys.executable).parent)) or "kmp-dask"
    t0 = time.perf_counter()
    proc = subprocess.run([kmp, "run", pipeline, "--output", str(out)], capture_output=True, text=True,
                          timeout=4 * 3600)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"kmp-dask run failed:\n{proc.stderr}")
    summary = json.loads((out / "summary.json").read_text())
    model = summary["steps"]["model"]
    history = model.pop("history", None) or []
    doc = {
        "pipeline": Path(pipeline).name, "command": f"kmp-dask run {pipeline}", "wall_seconds": wall,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "summary": summary,
        "per_iteration_seconds": [h.get("seconds") for h in history],
        "spec": json.loads((out / "pipeline.json").read_text()),
    }
    name = Path(pipeline).stem
    target = ROOT / "benchmarks" / "results" / f"pipeline_{name}.json"
    target.write_text(json.dumps(doc, indent=1))
    shutil.rmtree(out.parent, ignore_errors=True)
    print(f"{name}: {wall:.0f} s wall; written {target}")
    return target


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "pipelines" / "covertype_skmp.toml"))
