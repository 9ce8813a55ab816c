#!/usr/bin/env bash
# Start a dask scheduler (`dask scheduler`) that writes a scheduler file, then
# check that this machine's python/dask/distributed match it (cluster/check_versions.py). Runs in
# the foreground until Ctrl-C / SIGTERM (which stop the scheduler too). Extra arguments go to
# `dask scheduler` as they are.
#
# Environment (defaults in brackets):
#   KMP_SCHEDULER_HOST     interface to listen on [127.0.0.1]; "" lets dask choose (other machines)
#   KMP_SCHEDULER_PORT     port [8786]; 0 = a free one (read the address from the scheduler file)
#   KMP_SCHEDULER_FILE     scheduler file to write [cluster/scheduler.json]
#   KMP_DASHBOARD_ADDRESS  e.g. 127.0.0.1:8787 (the pages need bokeh) [no dashboard pages; the
#                          HTTP server (/health) on a free port of KMP_SCHEDULER_HOST]
#   KMP_IDLE_TIMEOUT       stop after this long without clients/tasks, e.g. 2h [never]
#   KMP_TLS_CA_FILE, KMP_TLS_CERT, KMP_TLS_KEY   TLS only (see start-scheduler-tls.sh)
#   KMP_START_TIMEOUT      seconds to wait for the scheduler file [60]
#   KMP_CHECK_VERSIONS=0   skip the version check; KMP_CHECK_TIMEOUT its timeout [60]
#   KMP_PYTHON, KMP_DASK   the python / dask commands [python / dask on PATH]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/_common.sh"

host="${KMP_SCHEDULER_HOST-127.0.0.1}"
port="${KMP_SCHEDULER_PORT:-8786}"
sched_file="${KMP_SCHEDULER_FILE:-$here/scheduler.json}"

args=(scheduler --port "$port" --scheduler-file "$sched_file")
[ -z "$host" ] || args+=(--host "$host")
if [ ${#TLS_ARGS[@]} -gt 0 ]; then
    args+=(--protocol tls "${TLS_ARGS[@]}")
fi
# the scheduler's HTTP server (/health, /metrics; the dashboard pages when bokeh is installed)
# listens on all interfaces at :8787 unless told otherwise: keep it on $host, on a free port
if [ -n "${KMP_DASHBOARD_ADDRESS:-}" ]; then
    args+=(--dashboard-address "$KMP_DASHBOARD_ADDRESS")
else
    args+=(--no-dashboard)
    [ -z "$host" ] || args+=(--dashboard-address "$host:0")
fi
[ -z "${KMP_IDLE_TIMEOUT:-}" ] || args+=(--idle-timeout "$KMP_IDLE_TIMEOUT")

mkdir -p "$(dirname "$sched_file")"
rm -f "$sched_file"
say "starting: ${DASK[*]} ${args[*]} $*"
"${DASK[@]}" "${args[@]}" "$@" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true' INT TERM
trap 'kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT

wait_for_file "$sched_file" "$pid" "${KMP_START_TIMEOUT:-60}"
address="$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["address"])' "$sched_file")"
say "scheduler at $address (pid $pid), scheduler file $sched_file"
check_versions 0 --scheduler-file "$sched_file" || die "version check failed; stopping the scheduler"
say "ready: start workers with  KMP_SCHEDULER_FILE=$sched_file $here/start-worker.sh"

status=0
wait "$pid" || status=$?
trap - EXIT
exit "$status"
