# Sourced by bench/run.sh and bench/manycore.sh: a private CA and an RSA-2048 server
# certificate for 127.0.0.1 and localhost (rustls does not accept a self-signed
# end-entity certificate as its own trust anchor, hence the CA).
#
# make_certs DIR CN DAYS: writes ca.pem, ca.key, server.pem and server.key into DIR.
make_certs() {
  local dir=$1 cn=$2 days=$3
  (
    cd "$dir"
    openssl req -x509 -newkey rsa:2048 -nodes -days "$days" -subj "/CN=$cn" \
      -keyout ca.key -out ca.pem -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout server.key -out server.csr 2>/dev/null
    printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
      "extendedKeyUsage=serverAuth" "subjectAltName=IP:127.0.0.1,DNS:localhost" >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days "$days" \
      -extfile server.ext -out server.pem 2>/dev/null
  )
}
