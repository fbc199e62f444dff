#!/bin/sh
# Makes the test certificates in this folder (checked in, so that tests need
# no openssl binary; run again only to change them). TEST KEYS: they are
# public, and no lockcached outside the tests may use them.
#   ca.pem             the CA every test trusts
#   server.pem/.key    localhost and 127.0.0.1, signed by ca.pem
#   server2.pem/.key   the same names, another key: a reload must switch to it
#   client.pem/.key    a client certificate signed by ca.pem (mutual TLS)
#   rogue-ca.pem       a CA nobody trusts, and rogue-client.pem/.key it signed
#   dns-ca.pem         a CA of its own, and dns-only.pem/.key it signed: localhost
#                      only, no address (a cluster's nodes named by address)
set -eu
cd "$(dirname "$0")"
days=36500
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() {  # ca NAME SUBJECT
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -subj "$2" -days $days -sha256 \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
    -out "$1.pem"
}
leaf() {  # leaf NAME CA SUBJECT EXTENSIONS
  key "$1.key"
  openssl req -new -key "$1.key" -subj "$3" -out "$1.csr"
  printf '%s\n' "$4" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days $days \
    -sha256 -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
server_ext='subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth'
client_ext='extendedKeyUsage=clientAuth'
ca ca "/CN=lockcached test CA"
leaf server ca "/CN=localhost" "$server_ext"
leaf server2 ca "/CN=localhost" "$server_ext"
leaf client ca "/CN=lockcached test client" "$client_ext"
ca rogue-ca "/CN=rogue CA"
leaf rogue-client rogue-ca "/CN=rogue client" "$client_ext"
ca dns-ca "/CN=lockcached test CA for names only"
leaf dns-only dns-ca "/CN=localhost" 'subjectAltName=DNS:localhost
extendedKeyUsage=serverAuth'
rm -f ca.key rogue-ca.key dns-ca.key ./*.srl
