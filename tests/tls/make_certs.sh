#!/usr/bin/env bash
# Writes the certificates the TLS tests use into DIR (created if missing):
#   ca.pem, ca.key          a CA that signs the two below
#   server.pem, server.key  the core's certificate: localhost and 127.0.0.1
#   client.pem, client.key  an instance's certificate, for mTLS
#   other-ca.pem            an unrelated CA: verifying against it must fail
#   expired.pem, .key       a server certificate of ca.pem that expired as it was made
# Keys are EC P-256 in PKCS#8 PEM ("BEGIN PRIVATE KEY"), which every SDK's
# TLS library reads. Real files from the openssl CLI, made fresh per run.
set -euo pipefail
dir=${1:?usage: make_certs.sh DIR}
mkdir -p "$dir"
cd "$dir"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

key ca.key
openssl req -x509 -new -key ca.key -days 2 -subj "/CN=cumulo test CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" -out ca.pem
key other-ca.key
openssl req -x509 -new -key other-ca.key -days 2 -subj "/CN=some other CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" -out other-ca.pem

sign() { # name subject extensions [days]
    key "$1.key"
    openssl req -new -key "$1.key" -subj "$2" -out "$1.csr"
    printf '%s\n' "$3" >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days "${4:-2}" -extfile "$1.ext" -out "$1.pem" 2>/dev/null
    rm -f "$1.csr" "$1.ext"
}
sign server "/CN=localhost" "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth
basicConstraints=CA:FALSE"
# notAfter = notBefore = now: expired a second later
sign expired "/CN=localhost" "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth
basicConstraints=CA:FALSE" 0
sign client "/CN=cumulo test instance" "extendedKeyUsage=clientAuth
basicConstraints=CA:FALSE"
chmod 600 ./*.key
