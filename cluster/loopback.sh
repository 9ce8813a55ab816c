#!/usr/bin/env bash
# A whole cluster on this machine, loopback only: start-scheduler.sh (a free port, scheduler file)
# + start-worker.sh (two single-threaded worker processes), both on 127.0.0.1 — the same commands
# tests/conftest.py::cli_cluster and tests/cluster/ run. Then, from Python:
#     KMPClassifier(client="cluster/scheduler.json").fit("data/train.zarr")
# or:  kmp-dask train data/train.zarr --model m.kmp --scheduler-file cluster/scheduler.json
#
#   cluster/loopback.sh [SCHEDULER_FILE]      (KMP_WORKERS worker processes [2]; the
#                                              start-worker.sh variables apply, e.g. KMP_MEMORY_LIMIT)
# Stop with Ctrl-C (scheduler and workers are ended).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export KMP_SCHEDULER_FILE="${1:-$here/scheduler.json}"
export KMP_SCHEDULER_HOST=127.0.0.1 KMP_WORKER_HOST=127.0.0.1
export KMP_SCHEDULER_PORT="${KMP_SCHEDULER_PORT:-0}"
export KMP_NWORKERS="${KMP_WORKERS:-${KMP_NWORKERS:-2}}" KMP_NTHREADS="${KMP_NTHREADS:-1}"
export KMP_WORKER_NAME="${KMP_WORKER_NAME:-w}"
rm -f "$KMP_SCHEDULER_FILE"

"$here/start-scheduler.sh" &
sched=$!
worker=
trap 'kill -TERM $worker $sched 2>/dev/null || true' INT TERM EXIT
"$here/start-worker.sh" &
worker=$!
wait
