#!/usr/bin/env bash
# secure.sh — a second single-node Apache Kafka 3.9.1 broker (KRaft, combined
# broker+controller) on 127.0.0.1 for dpstream's TLS and SASL tests. It uses
# the jars deploy/kafka/kafka.sh fetches (deploy/kafka/lib) and runs beside
# the development broker of kafka.sh (127.0.0.1:9092), on its own ports, data
# directory and certificates.
#
#   deploy/kafka/secure.sh start    generate certificates and users, format, start, wait until ready;
#                                   prints the path of broker.json (listeners, files, users)
#   deploy/kafka/secure.sh stop     stop the broker and delete its data, certificates and passwords
#   deploy/kafka/secure.sh status   say whether it runs; exit 0 if it answers, 1 if not
#
# Listeners (port base DPSTREAM_SECURE_KAFKA_PORT, default 9192):
#   base+0  SSL             TLS, server authentication only
#   base+1  MTLS            TLS, client certificate required (ssl.client.auth=required)
#   base+2  SASL_SSL        TLS + SCRAM-SHA-256 and SCRAM-SHA-512 (user created at format time)
#   base+3  SASL_PLAINTEXT  PLAIN (user in the listener's JAAS configuration)
#   base+4  INTERNAL        plaintext, inter-broker and this script's readiness check only
#   base+5  CONTROLLER      KRaft controller
#
# Every start is fresh: a new test CA, server certificate (127.0.0.1 and
# localhost), client certificate, an expired client certificate, a second
# ("untrusted") CA with a client certificate of its own, new random
# passwords, and an empty data directory. All of it lives in
# deploy/kafka/secure/ (which ignores itself in git); the broker's log is
# deploy/kafka/secure.log. Certificates and keys are PEM (ssl.keystore.type
# and ssl.truststore.type PEM). `start` is idempotent: with the broker up it
# only prints the path of broker.json.
#
# Environment (all optional):
#   DPSTREAM_SECURE_KAFKA_PORT   first port (default 9192; uses six)
#   DPSTREAM_SECURE_KAFKA_HEAP   JVM heap options (default "-Xms128m -Xmx512m")
#   DPSTREAM_SECURE_KAFKA_WAIT   seconds to wait for readiness (default 90)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=common.sh
. "$here/common.sh"
lib="$here/lib"
dir="$here/secure"
data="$dir/data"
certs="$dir/certs"
logfile="$here/secure.log"
pidfile="$dir/kafka.pid"
base="${DPSTREAM_SECURE_KAFKA_PORT:-9192}"
heap="${DPSTREAM_SECURE_KAFKA_HEAP:--Xms128m -Xmx512m}"
wait_s="${DPSTREAM_SECURE_KAFKA_WAIT:-90}"
host=127.0.0.1
p_ssl=$base
p_mtls=$((base + 1))
p_sasl_ssl=$((base + 2))
p_sasl_plain=$((base + 3))
p_internal=$((base + 4))
p_controller=$((base + 5))
stamp="$lib/.complete-3.9.1" # written by kafka.sh after a complete download
# The user of both SASL listeners (SCRAM credentials for SASL_SSL, a PLAIN
# password for SASL_PLAINTEXT; the passwords differ).
user=dpstream

say() { echo "secure.sh: $*" >&2; }

# metadata_ok: the broker answers an ApiVersions round trip on the internal
# plaintext listener (see common.sh).
metadata_ok() { api_versions_ok "$lib" "$dir" "$host:$p_internal"; }
# internal_ready: the internal listener is open and answers a metadata request.
internal_ready() { port_open "$p_internal" && metadata_ok; }

# gen_certs writes, into $certs: ca.pem (the test CA), server.pem (key +
# chain, the broker's PEM keystore), client.pem/client.key (signed by the
# CA), expired.pem/expired.key (signed by the CA, valid only in 2020),
# other-ca.pem and untrusted.pem/untrusted.key (a second CA the broker does
# not trust, and a client certificate it signed).
gen_certs() {
  need openssl "openssl generates the test certificates"
  rm -rf "$certs"
  mkdir -p "$certs"
  (
    cd "$certs"
    umask 077
    key() { openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1" 2>/dev/null; }
    ca() { # ca NAME CN
      key "$1.key"
      openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 30 -subj "/CN=$2" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    }
    leaf() { # leaf NAME CA CN EXTFILE [openssl x509 options...]
      local name=$1 signer=$2 cn=$3 ext=$4
      shift 4
      key "$name.key"
      openssl req -new -key "$name.key" -out "$name.csr" -subj "/CN=$cn" 2>/dev/null
      openssl x509 -req -in "$name.csr" -CA "$signer.pem" -CAkey "$signer.key" -set_serial "0x$(openssl rand -hex 8)" \
        -extfile "$ext" -out "$name.pem" "$@" 2>/dev/null
      rm -f "$name.csr"
    }
    printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n' >server.ext
    printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >client.ext
    ca ca "dpstream test CA"
    ca other-ca "dpstream untrusted test CA"
    leaf server ca localhost server.ext -days 30
    cat server.key server.pem >server.keystore.pem
    leaf client ca dpstream-client client.ext -days 30
    leaf untrusted other-ca dpstream-untrusted-client client.ext -days 30
    # Expired: `openssl x509 -req` cannot back-date (before OpenSSL 3.4),
    # `openssl ca` can.
    key expired.key
    openssl req -new -key expired.key -out expired.csr -subj "/CN=dpstream-expired-client" 2>/dev/null
    mkdir -p ca-db
    : >ca-db/index.txt
    cat >ca-db/openssl.cnf <<EOF
[ca]
default_ca = test
[test]
database = $certs/ca-db/index.txt
new_certs_dir = $certs/ca-db
serial = $certs/ca-db/serial
default_md = sha256
policy = any
unique_subject = no
copy_extensions = none
x509_extensions = client
[any]
commonName = supplied
[client]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
EOF
    openssl rand -hex 8 >ca-db/serial
    openssl ca -batch -config ca-db/openssl.cnf -cert ca.pem -keyfile ca.key -in expired.csr -out expired.pem \
      -startdate 20200101000000Z -enddate 20200102000000Z -notext 2>/dev/null
    rm -rf expired.csr ca-db ./*.ext
    # The tests read the client files; the CA keys are not needed any more.
    rm -f ca.key other-ca.key
  )
}

write_configs() {
  mkdir -p "$dir" "$data"
  # The directory holds keys and passwords: private, and ignored by git.
  chmod 700 "$dir"
  printf '*\n' >"$dir/.gitignore"
  umask 077
  openssl rand -hex 16 >"$dir/scram-password"
  openssl rand -hex 16 >"$dir/plain-password"
  local plain_pw
  plain_pw="$(cat "$dir/plain-password")"
  cat >"$dir/server.properties" <<EOF
# Generated by deploy/kafka/secure.sh; rewritten on every start.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$host:$p_controller
listeners=SSL://$host:$p_ssl,MTLS://$host:$p_mtls,SASL_SSL://$host:$p_sasl_ssl,SASL_PLAINTEXT://$host:$p_sasl_plain,INTERNAL://$host:$p_internal,CONTROLLER://$host:$p_controller
advertised.listeners=SSL://$host:$p_ssl,MTLS://$host:$p_mtls,SASL_SSL://$host:$p_sasl_ssl,SASL_PLAINTEXT://$host:$p_sasl_plain,INTERNAL://$host:$p_internal
controller.listener.names=CONTROLLER
inter.broker.listener.name=INTERNAL
listener.security.protocol.map=CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT
# TLS: PEM keystore (key + chain) and truststore (the test CA).
ssl.keystore.type=PEM
ssl.keystore.location=$certs/server.keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$certs/ca.pem
ssl.client.auth=none
listener.name.mtls.ssl.client.auth=required
# SASL: SCRAM on SASL_SSL (credentials stored in the metadata log by
# kafka-storage format --add-scram), PLAIN on SASL_PLAINTEXT.
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$user="$plain_pw";
EOF
  # auto.create.topics.enable is off, unlike kafka.sh: a metadata request must
  # not create a missing topic (the tests check that a missing topic is named).
  single_node_properties "$data" false >>"$dir/server.properties"
  write_log4j "$dir" "$logfile"
  cat >"$dir/broker.json" <<EOF
{
  "ssl": "$host:$p_ssl",
  "mtls": "$host:$p_mtls",
  "sasl_ssl": "$host:$p_sasl_ssl",
  "sasl_plaintext": "$host:$p_sasl_plain",
  "plaintext": "$host:$p_internal",
  "ca_file": "$certs/ca.pem",
  "client_cert": "$certs/client.pem",
  "client_key": "$certs/client.key",
  "expired_cert": "$certs/expired.pem",
  "expired_key": "$certs/expired.key",
  "untrusted_cert": "$certs/untrusted.pem",
  "untrusted_key": "$certs/untrusted.key",
  "other_ca_file": "$certs/other-ca.pem",
  "user": "$user",
  "scram_password_file": "$dir/scram-password",
  "plain_password_file": "$dir/plain-password"
}
EOF
}

format_storage() {
  local id scram_pw
  scram_pw="$(cat "$dir/scram-password")"
  id="$(java -cp "$lib/*" -Dlog4j.configuration="file:$dir/tools-log4j.properties" kafka.tools.StorageTool random-uuid)"
  java -cp "$lib/*" -Dlog4j.configuration="file:$dir/tools-log4j.properties" \
    kafka.tools.StorageTool format -t "$id" -c "$dir/server.properties" \
    --add-scram "SCRAM-SHA-256=[name=$user,password=$scram_pw]" \
    --add-scram "SCRAM-SHA-512=[name=$user,password=$scram_pw]" >/dev/null
}

start() {
  need java "Java 17 is needed to run the broker"
  if pid_alive && port_open "$p_internal" && metadata_ok; then
    echo "$dir/broker.json"
    return 0
  fi
  local p
  if ! pid_alive; then
    for p in $p_ssl $p_mtls $p_sasl_ssl $p_sasl_plain $p_internal $p_controller; do
      if port_open "$p"; then
        say "port $p is already in use by a process this script did not start; stop it or set DPSTREAM_SECURE_KAFKA_PORT"
        exit 1
      fi
    done
  fi
  if pid_alive; then
    say "broker process $(cat "$pidfile") is running but not ready yet; waiting"
  else
    if [ ! -f "$stamp" ]; then
      "$here/kafka.sh" fetch
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    write_configs
    gen_certs
    format_storage
    say "starting the secure broker on $host:$p_ssl-$p_controller (log: $logfile)"
    : >"$logfile"
    # shellcheck disable=SC2086
    setsid java $heap -XX:+UseG1GC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
      -Dlog4j.configuration="file:$dir/log4j.properties" \
      -cp "$lib/*" kafka.Kafka "$dir/server.properties" \
      >>"$logfile" 2>&1 </dev/null &
    echo $! >"$pidfile"
  fi
  await_ready "the broker" "did not answer on $host:$p_internal" "" internal_ready
  say "ready"
  echo "$dir/broker.json"
}

stop() {
  if pid_alive; then
    local pid
    pid="$(cat "$pidfile")"
    say "stopping the secure broker (pid $pid)"
    kill_broker "$pid"
  else
    say "not running"
  fi
  # Data, certificates, keys and passwords are per start: remove them.
  rm -rf "$dir"
}

status() {
  if pid_alive; then
    if port_open "$p_internal"; then
      echo "running (pid $(cat "$pidfile")) on $host:$p_ssl-$p_controller; $dir/broker.json"
      return 0
    fi
    echo "starting (pid $(cat "$pidfile"))"
    return 1
  fi
  echo "not running"
  return 1
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
