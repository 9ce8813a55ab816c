#!/usr/bin/env bash
# start-worker.sh over TLS (for a scheduler started by start-scheduler-tls.sh; its address is
# tls://...). Certificates: cluster/make-certs.sh DIR (default DIR: cluster/certs).
#   KMP_TLS_DIR       where ca.pem, node.pem, node.key are [cluster/certs]
#   KMP_TLS_CA_FILE, KMP_TLS_CERT, KMP_TLS_KEY   override single files [$KMP_TLS_DIR/{ca.pem,node.pem,node.key}]
# Everything else as start-worker.sh (KMP_SCHEDULER / KMP_SCHEDULER_FILE, KMP_NWORKERS, ...).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=cluster/_tls.sh
source "$here/_tls.sh"
exec "$here/start-worker.sh" "$@"
