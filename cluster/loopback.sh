#!/usr/bin/env bash
# Start a dask scheduler and two single-threaded worker processes on 127.0.0.1 — the same
# commands tests/conftest.py::cli_cluster runs (ECOSYSTEM.md §3.2). Then, from Python:
#     KMPClassifier(client="cluster/scheduler.json").fit("data/train.zarr")
# or:  kmp-dask demo --scheduler cluster/scheduler.json
# Stop with Ctrl-C (both processes are ended).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
sched_file="${1:-$here/scheduler.json}"
workers="${KMP_WORKERS:-2}"
rm -f "$sched_file"
dask scheduler --host 127.0.0.1 --port 0 --no-dashboard --scheduler-file "$sched_file" &
sched=$!
trap 'kill $sched $worker 2>/dev/null || true' EXIT INT TERM
while [ ! -s "$sched_file" ]; do sleep 0.2; done
OMP_NUM_THREADS=1 dask worker --scheduler-file "$sched_file" --host 127.0.0.1 \
    --nworkers "$workers" --nthreads 1 --no-dashboard --death-timeout 60 --name w &
worker=$!
echo "scheduler file: $sched_file ($workers workers)"
wait
