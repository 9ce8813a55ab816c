#!/usr/bin/env bash
# start-scheduler.sh over TLS only (a tls:// address; clients and workers need certificates
# signed by the same CA). Certificates: cluster/make-certs.sh DIR (default DIR: cluster/certs).
#   KMP_TLS_DIR       where ca.pem, node.pem, node.key are [cluster/certs]
#   KMP_TLS_CA_FILE, KMP_TLS_CERT, KMP_TLS_KEY   override single files [$KMP_TLS_DIR/{ca.pem,node.pem,node.key}]
# Everything else as start-scheduler.sh (KMP_SCHEDULER_HOST, KMP_SCHEDULER_PORT, KMP_SCHEDULER_FILE, ...).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
certs="${KMP_TLS_DIR:-$here/certs}"
export KMP_TLS_CA_FILE="${KMP_TLS_CA_FILE:-$certs/ca.pem}"
export KMP_TLS_CERT="${KMP_TLS_CERT:-$certs/node.pem}"
export KMP_TLS_KEY="${KMP_TLS_KEY:-$certs/node.key}"
exec "$here/start-scheduler.sh" "$@"
