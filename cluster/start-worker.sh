#!/usr/bin/env bash
# Start dask worker processes (`dask worker --nworkers N --nthreads T`) for a
# running scheduler, then check that their versions match this machine's and the scheduler's
# (cluster/check_versions.py; a mismatch stops the workers). Runs in the foreground until
# Ctrl-C / SIGTERM. Extra arguments go to `dask worker` as they are.
#
# Environment (defaults in brackets):
#   KMP_SCHEDULER          the scheduler's address (tcp://host:8786, tls://host:8786) — or:
#   KMP_SCHEDULER_FILE     its scheduler file [cluster/scheduler.json] (waited for, see KMP_START_TIMEOUT)
#   KMP_WORKER_HOST        interface to listen on [127.0.0.1]; "" lets dask choose (other machines)
#   KMP_NWORKERS           worker processes [number of cores]
#   KMP_NTHREADS           threads per worker process [1: kernel blocks are single-threaded BLAS]
#   KMP_MEMORY_LIMIT       per worker process, e.g. 4GiB [auto: the machine's memory / KMP_NWORKERS]
#   KMP_LOCAL_DIRECTORY    scratch directory: dask spill files and kmp_dask's paged-out partitions
#                          [${TMPDIR:-/tmp}/kmp-dask-worker-$UID]
#   KMP_WORKER_NAME        name prefix [the host name]
#   KMP_DEATH_TIMEOUT      seconds a worker survives without its scheduler [60]
#   KMP_TLS_CA_FILE, KMP_TLS_CERT, KMP_TLS_KEY   TLS only (see start-worker-tls.sh)
#   KMP_START_TIMEOUT      seconds to wait for the scheduler file [60]
#   KMP_CHECK_VERSIONS=0   skip the version check; KMP_CHECK_TIMEOUT its timeout [60]
#   KMP_PYTHON, KMP_DASK   the python / dask commands [python / dask on PATH]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/_common.sh"

host="${KMP_WORKER_HOST-127.0.0.1}"
nworkers="${KMP_NWORKERS:-$(nproc 2>/dev/null || echo 1)}"
nthreads="${KMP_NTHREADS:-1}"
memory_limit="${KMP_MEMORY_LIMIT:-auto}"
local_dir="${KMP_LOCAL_DIRECTORY:-${TMPDIR:-/tmp}/kmp-dask-worker-$(id -u)}"
name="${KMP_WORKER_NAME:-$(hostname -s 2>/dev/null || hostname)}"

if [ -n "${KMP_SCHEDULER:-}" ]; then
    target=("$KMP_SCHEDULER")
else
    sched_file="${KMP_SCHEDULER_FILE:-$here/scheduler.json}"
    target=(--scheduler-file "$sched_file")
    waited=0
    until [ -s "$sched_file" ]; do
        [ "$waited" -lt "$((${KMP_START_TIMEOUT:-60} * 5))" ] ||
            die "no scheduler file $sched_file after ${KMP_START_TIMEOUT:-60} s (start-scheduler.sh first)"
        sleep 0.2
        waited=$((waited + 1))
    done
fi

mkdir -p "$local_dir"
args=(worker "${target[@]}" --nworkers "$nworkers" --nthreads "$nthreads" --memory-limit "$memory_limit"
      --local-directory "$local_dir" --name "$name" --death-timeout "${KMP_DEATH_TIMEOUT:-60}" --no-dashboard
      "${TLS_ARGS[@]}")
# also keep each worker's HTTP server (it listens on all interfaces by default) on $host
[ -z "$host" ] || args+=(--host "$host" --dashboard-address "$host:0")

# one BLAS thread per worker thread (the nanny sets these too; this covers --no-nanny)
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" \
       MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}"
say "starting: ${DASK[*]} ${args[*]} $*"
"${DASK[@]}" "${args[@]}" "$@" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true' INT TERM
trap 'kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT

check_versions "$nworkers" "${target[@]}" || die "version check failed; stopping the workers"
say "$nworkers worker process(es) × $nthreads thread(s), memory limit $memory_limit each, scratch $local_dir (pid $pid)"

status=0
wait "$pid" || status=$?
trap - EXIT
exit "$status"
