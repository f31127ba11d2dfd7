#!/usr/bin/env bash
# make-cert.sh DIR HOST... — TEST ONLY: a throwaway root CA and one leaf certificate for HOSTs,
# for the provider stand-ins.
#
# Writes into DIR:
#   root.pem      the root CA certificate (what the client — or the proxy's upstream override —
#                 trusts: NODE_EXTRA_CA_CERTS, CODEX_CA_CERTIFICATE, upstream_overrides.ca_cert)
#   root.key      its key
#   leaf.pem      the leaf certificate followed by root.pem (the chain a stand-in serves: --cert)
#   leaf.key      the leaf's key (--key)
# The leaf carries every HOST as a subjectAltName (a DNS name, or an IP address for an IPv4/IPv6
# literal). 127.0.0.1 and localhost are always added, so a client can also reach the stand-in
# directly. Keys are ECDSA P-256; validity 30 days.
set -euo pipefail

if [[ $# -lt 2 ]]; then
    echo "usage: $0 DIR HOST..." >&2
    exit 2
fi
dir=$1
shift
mkdir -p "$dir"

san=""
declare -A seen=()
for host in "$@" localhost 127.0.0.1; do
    [[ -n ${seen[$host]:-} ]] && continue
    seen[$host]=1
    if [[ $host =~ ^[0-9.]+$ || $host == *:* ]]; then
        san+="${san:+,}IP:$host"
    else
        san+="${san:+,}DNS:$host"
    fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

openssl ecparam -name prime256v1 -genkey -noout -out "$tmp/root.ec" 2>/dev/null
openssl pkcs8 -topk8 -nocrypt -in "$tmp/root.ec" -out "$dir/root.key"
openssl req -x509 -new -key "$dir/root.key" -sha256 -days 30 \
    -subj "/CN=agenthold test stand-in root" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -addext "subjectKeyIdentifier=hash" \
    -out "$dir/root.pem" 2>/dev/null

openssl ecparam -name prime256v1 -genkey -noout -out "$tmp/leaf.ec" 2>/dev/null
openssl pkcs8 -topk8 -nocrypt -in "$tmp/leaf.ec" -out "$dir/leaf.key"
openssl req -new -key "$dir/leaf.key" -subj "/CN=$1" -out "$tmp/leaf.csr" 2>/dev/null
cat >"$tmp/leaf.ext" <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=$san
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
EOF
openssl x509 -req -in "$tmp/leaf.csr" -CA "$dir/root.pem" -CAkey "$dir/root.key" -CAcreateserial \
    -CAserial "$tmp/root.srl" -days 30 -sha256 -extfile "$tmp/leaf.ext" -out "$tmp/leaf.crt" 2>/dev/null
cat "$tmp/leaf.crt" "$dir/root.pem" >"$dir/leaf.pem"
chmod 600 "$dir/root.key" "$dir/leaf.key"
echo "$dir: root.pem leaf.pem leaf.key (SAN $san)"
