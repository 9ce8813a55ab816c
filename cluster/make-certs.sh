#!/usr/bin/env bash
# Make a dedicated certificate authority for one dask cluster and a certificate/key it signs,
# for start-scheduler-tls.sh / start-worker-tls.sh and the client (kmp-dask --tls-ca-file
# --tls-cert --tls-key; distributed.Security(tls_ca_file=, tls_client_cert=, tls_client_key=)).
#
#   cluster/make-certs.sh [--force] [--days N] [--name NAME] DIR [SAN ...]
#
# DIR/ca.pem, DIR/ca.key   the CA (created if DIR/ca.pem does not exist; keep ca.key off the nodes)
# DIR/NAME.pem, NAME.key   a certificate + key signed by that CA [NAME = node], valid for N days
#                          [365], for 127.0.0.1, localhost and each SAN (an IP or a DNS name)
# Run it again with another --name to issue more certificates from the same CA (e.g. one for the
# client, one per node). --force replaces an existing NAME.pem.
#
# Why openssl and not distributed's own tool: distributed offers Security.temporary(), which needs
# the `cryptography` package (not a kmp_dask dependency) and makes one self-signed certificate that
# exists only in the memory of one Python process — right for LocalCluster(security=...), useless
# for a scheduler and workers started as separate commands or on other machines, which need files.
# distributed's TLS contexts do not check host names (check_hostname = False, "we expect a
# dedicated CA for the cluster"): whoever holds a certificate signed by the CA can join. So the
# trust is the CA: one CA per cluster, its key kept away from the nodes, certificates short-lived.
set -euo pipefail
prog="$(basename "$0" .sh)"
die() { printf '%s: error: %s\n' "$prog" "$*" >&2; exit 1; }

force=0 days=365 name=node
while [ $# -gt 0 ]; do
    case "$1" in
        --force) force=1; shift ;;
        --days) days="$2"; shift 2 ;;
        --name) name="$2"; shift 2 ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        -*) die "unknown option $1" ;;
        *) break ;;
    esac
done
[ $# -ge 1 ] || die "usage: $prog [--force] [--days N] [--name NAME] DIR [SAN ...]"
dir="$1"; shift
command -v openssl >/dev/null 2>&1 || die "openssl not found"
mkdir -p "$dir"
umask 077

san="IP:127.0.0.1,DNS:localhost"
for s in "$@"; do
    if [[ "$s" =~ ^[0-9.]+$ || "$s" == *:* ]]; then san="$san,IP:$s"; else san="$san,DNS:$s"; fi
done

if [ ! -s "$dir/ca.pem" ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days "$days" \
        -keyout "$dir/ca.key" -out "$dir/ca.pem" -subj "/CN=kmp-dask cluster CA" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        2>/dev/null || die "openssl could not make the CA"
    printf '%s: made CA %s (its key %s: keep it off the nodes)\n' "$prog" "$dir/ca.pem" "$dir/ca.key" >&2
else
    [ -s "$dir/ca.key" ] || die "$dir/ca.pem exists but $dir/ca.key does not: cannot sign"
fi
if [ -e "$dir/$name.pem" ] && [ "$force" != 1 ]; then
    die "$dir/$name.pem exists (--force to replace it, --name for another)"
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/ext" <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$san
EOF
openssl req -newkey rsa:2048 -nodes -sha256 -keyout "$tmp/key" -out "$tmp/csr" -subj "/CN=kmp-dask $name" \
    2>/dev/null || die "openssl could not make the key"
openssl x509 -req -in "$tmp/csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial -sha256 \
    -days "$days" -extfile "$tmp/ext" -out "$tmp/pem" 2>/dev/null || die "openssl could not sign"
mv "$tmp/key" "$dir/$name.key"
mv "$tmp/pem" "$dir/$name.pem"
chmod 600 "$dir/$name.key" "$dir/ca.key"
chmod 644 "$dir/$name.pem" "$dir/ca.pem"
printf '%s: made %s and %s (signed by %s; %s; %s days)\n' "$prog" "$dir/$name.pem" "$dir/$name.key" \
    "$dir/ca.pem" "$san" "$days" >&2
