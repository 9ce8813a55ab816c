#!/usr/bin/env bash
# start-scheduler.sh over TLS only (a tls:// address; clients and workers need certificates
# signed by the same CA). Certificates: cluster/make-certs.sh DIR (default DIR: cluster/certs).
#   KMP_TLS_DIR       where ca.pem, node.pem, node.key are [cluster/certs]
#   KMP_TLS_CA_FILE, KMP_TLS_CERT, KMP_TLS_KEY   override single files [$KMP_TLS_DIR/{ca.pem,node.pem,node.key}]
# Everything else as start-scheduler.sh (KMP_SCHEDULER_HOST, KMP_SCHEDULER_PORT, KMP_SCHEDULER_FILE, ...).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=cluster/_tls.sh
source "$here/_tls.sh"
exec "$here/start-scheduler.sh" "$@"
