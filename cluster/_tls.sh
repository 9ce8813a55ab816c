# Sourced by start-*-tls.sh: certificate defaults from KMP_TLS_DIR (default cluster/certs, made by
# make-certs.sh); KMP_TLS_CA_FILE / KMP_TLS_CERT / KMP_TLS_KEY override single files.
# shellcheck shell=bash
certs="${KMP_TLS_DIR:-$here/certs}"
export KMP_TLS_CA_FILE="${KMP_TLS_CA_FILE:-$certs/ca.pem}"
export KMP_TLS_CERT="${KMP_TLS_CERT:-$certs/node.pem}"
export KMP_TLS_KEY="${KMP_TLS_KEY:-$certs/node.key}"
