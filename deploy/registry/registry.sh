#!/usr/bin/env bash
# registry.sh — a Confluent-compatible schema registry (Apicurio Registry
# 2.6.13.Final, in-memory storage) on 127.0.0.1 for dpstream's tests of
# framed Avro input (schema.registry.url).
#
#   deploy/registry/registry.sh start    fetch the app if needed, start, wait until ready; prints the ccompat URL
#   deploy/registry/registry.sh stop     stop the registry started by this script (SIGTERM, then SIGKILL)
#   deploy/registry/registry.sh status   say whether it runs; exit 0 if it answers, 1 if not
#   deploy/registry/registry.sh fetch    only fetch and unpack the app into deploy/registry/lib
#
# The app (the built Quarkus application, Maven artifact
# io.apicurio:apicurio-registry-app:2.6.13.Final, classifier all, type
# tar.gz: pom.xml beside this script) comes from Maven Central once and is
# cached in deploy/registry/lib; the pid file lives in deploy/registry/run,
# the log in deploy/registry/registry.log. All are git-ignored. Storage is
# in memory: a restart forgets every schema. 2.6 runs on Java 17 (3.x needs
# Java 21 or later). `start` is idempotent.
#
# Environment (all optional):
#   DPSTREAM_REGISTRY_PORT   HTTP port (default 8081)
#   DPSTREAM_REGISTRY_HEAP   JVM heap options (default "-Xms64m -Xmx384m")
#   DPSTREAM_REGISTRY_WAIT   seconds to wait for readiness (default 120)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=../kafka/common.sh
. "$here/../kafka/common.sh"
lib="$here/lib"
run="$here/run"
logfile="$here/registry.log"
pidfile="$run/registry.pid"
port="${DPSTREAM_REGISTRY_PORT:-8081}"
heap="${DPSTREAM_REGISTRY_HEAP:--Xms64m -Xmx384m}"
wait_s="${DPSTREAM_REGISTRY_WAIT:-120}"
host=127.0.0.1
version=2.6.13.Final
runner="$lib/apicurio-registry-app-$version-runner.jar"
url="http://$host:$port/apis/ccompat/v7"
# Written after a complete download and unpack, so that an interrupted one
# is retried instead of leaving a partial lib/.
stamp="$lib/.complete-$version"

say() { echo "registry.sh: $*" >&2; }

# ready: the registry answers the Confluent-compatible API.
ready() { curl -fsS -o /dev/null --max-time 5 "$url/subjects" 2>/dev/null; }

fetch_app() {
  if [ -f "$stamp" ]; then return; fi
  need mvn "Maven is needed once to fetch the registry from Maven Central"
  say "fetching Apicurio Registry $version from Maven Central into $lib (once, ~140 MB)"
  rm -rf "$lib"
  (cd "$here" && mvn -q -B -Dstyle.color=never dependency:copy-dependencies -DoutputDirectory=lib) >&2
  tar -xzf "$lib/apicurio-registry-app-$version-all.tar.gz" -C "$lib"
  rm -f "$lib/apicurio-registry-app-$version-all.tar.gz"
  ls "$runner" >/dev/null
  touch "$stamp"
}

start() {
  need java "Java 17 is needed to run the registry"
  need curl "the readiness check asks the registry's HTTP API"
  if running_or_free registry DPSTREAM_REGISTRY_PORT "$url" ready; then
    return 0
  fi
  if ! pid_alive; then
    fetch_app
    mkdir -p "$run"
    say "starting the registry on $host:$port (log: $logfile)"
    # setsid: the JVM outlives this script and is not killed with its
    # process group. A background job of a non-interactive shell is not a
    # process group leader, so setsid execs java in place: $! is the
    # JVM's own pid (checked below). Quarkus' management interface is
    # pinned off (3.x would open one on 0.0.0.0:9000).
    # shellcheck disable=SC2086
    setsid java $heap -Djava.awt.headless=true \
      -Dquarkus.http.host="$host" -Dquarkus.http.port="$port" \
      -Dquarkus.management.enabled=false \
      -jar "$runner" >>"$logfile" 2>&1 </dev/null &
    echo $! >"$pidfile"
  fi
  await_ready "the registry" "did not answer $url/subjects" "" ready
  if [ "$(cat "/proc/$(cat "$pidfile")/comm" 2>/dev/null)" != java ]; then
    say "warning: pid $(cat "$pidfile") is not the JVM"
  fi
  say "ready"
  echo "$url"
}

stop() { stop_process "the registry"; }

status() {
  if pid_alive; then
    if ready; then
      echo "running (pid $(cat "$pidfile")) at $url"
      return 0
    fi
    echo "starting (pid $(cat "$pidfile")), not yet answering at $url"
    return 1
  fi
  if port_open "$port"; then
    echo "not started by this script, but something listens on $host:$port"
    return 1
  fi
  echo "not running"
  return 1
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  fetch) fetch_app ;;
  *) echo "usage: $0 start|stop|status|fetch" >&2; exit 2 ;;
esac
