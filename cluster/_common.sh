# Shared by the start-*.sh scripts of this folder (sourced, not run). Defines:
#   PYTHON      the interpreter used for check_versions.py (KMP_PYTHON, else python, else python3)
#   DASK        the `dask` command as an array (KMP_DASK, else `dask` on PATH, else "$PYTHON -m dask")
#   TLS_ARGS    --tls-ca-file/--tls-cert/--tls-key from KMP_TLS_CA_FILE/KMP_TLS_CERT/KMP_TLS_KEY (or empty)
#   say, die, wait_for_file, check_versions
# shellcheck shell=bash

here="${here:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
prog="$(basename "$0" .sh)"

say() { printf '%s: %s\n' "$prog" "$*" >&2; }
die() { say "error: $*"; exit 1; }

if [ -n "${KMP_PYTHON:-}" ]; then
    PYTHON="$KMP_PYTHON"
elif command -v python >/dev/null 2>&1; then
    PYTHON=python
else
    PYTHON=python3
fi
if [ -n "${KMP_DASK:-}" ]; then
    read -r -a DASK <<<"$KMP_DASK"
elif command -v dask >/dev/null 2>&1; then
    DASK=(dask)
else
    DASK=("$PYTHON" -m dask)
fi

TLS_ARGS=()
if [ -n "${KMP_TLS_CA_FILE:-}${KMP_TLS_CERT:-}${KMP_TLS_KEY:-}" ]; then
    for v in KMP_TLS_CA_FILE KMP_TLS_CERT KMP_TLS_KEY; do
        [ -n "${!v:-}" ] || die "TLS needs KMP_TLS_CA_FILE, KMP_TLS_CERT and KMP_TLS_KEY; $v is not set"
    done
    for v in KMP_TLS_CA_FILE KMP_TLS_CERT KMP_TLS_KEY; do
        [ -r "${!v}" ] || die "$v=${!v}: no such readable file (make certificates with cluster/make-certs.sh)"
    done
    TLS_ARGS=(--tls-ca-file "$KMP_TLS_CA_FILE" --tls-cert "$KMP_TLS_CERT" --tls-key "$KMP_TLS_KEY")
fi

# wait_for_file FILE PID TIMEOUT: until FILE is non-empty; fails if PID exits or TIMEOUT seconds pass
wait_for_file() {
    local file="$1" pid="$2" timeout="$3" waited=0
    until [ -s "$file" ]; do
        kill -0 "$pid" 2>/dev/null || die "the process ($pid) exited before writing $file"
        [ "$waited" -lt "$((timeout * 5))" ] || die "no $file after ${timeout} s"
        sleep 0.2
        waited=$((waited + 1))
    done
}

# check_versions MIN_WORKERS TARGET_ARGS...: run check_versions.py unless KMP_CHECK_VERSIONS=0
check_versions() {
    local min="$1"
    shift
    if [ "${KMP_CHECK_VERSIONS:-1}" = "0" ]; then
        say "version check skipped (KMP_CHECK_VERSIONS=0)"
        return 0
    fi
    "$PYTHON" "$here/check_versions.py" "$@" --min-workers "$min" \
        --timeout "${KMP_CHECK_TIMEOUT:-60}" "${TLS_ARGS[@]}"
}
