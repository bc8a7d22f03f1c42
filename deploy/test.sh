#!/usr/bin/env bash
# Runs dpstream's whole test suite: starts the project's own Apache Kafka
# broker (KRaft, fetched from Maven Central on first use) and the TLS/SASL
# test broker so that the broker integration tests run too, then runs every
# Go test of every module, the race detector over the concurrent code's
# tests, and a short fuzz of every fuzz target. Every step runs, whatever
# the others did; each prints its result and duration, the end prints one
# line per step, and the script exits non-zero if any step failed.
#
# Environment (all optional):
#   DPSTREAM_KAFKA_PORT          the development broker's port (default 9092;
#                                its KRaft controller takes the next one, or
#                                DPSTREAM_KAFKA_CONTROLLER_PORT)
#   DPSTREAM_SECURE_KAFKA_PORT   the first of the TLS/SASL broker's six ports
#                                (default 9192: 9192-9197)
#   DPSTREAM_TEST_BROKERS        use these brokers (host:port,...) instead of
#                                starting one
#   DPSTREAM_TEST_SECURE_BROKER  use this TLS/SASL broker (the broker.json
#                                secure.sh printed) instead of starting one
#   DPSTREAM_CONNECT_PORT        the Kafka Connect worker's REST port (default 58083)
#   DPSTREAM_PG_PORT             the PostgreSQL server's port (default 55432)
#   DPSTREAM_TEST_CONNECT        use this Connect worker (REST URL) instead of starting one
#   DPSTREAM_TEST_POSTGRES       use this PostgreSQL server (postgresql:// URL) instead of starting one
#   DPSTREAM_REGISTRY_PORT       the schema registry's port (default 8081)
#   DPSTREAM_TEST_REGISTRY       use this schema registry (the URL
#                                deploy/registry/registry.sh printed)
#                                instead of starting one
#   DPSTREAM_KEEP_BROKER=1       leave the brokers (and the Connect worker,
#                                PostgreSQL and the schema registry) this
#                                script started running
#                                (quicker re-runs), with their data
#   DPSTREAM_TEST_RACE=0         skip the race step (quicker local runs; CI runs it)
set -uo pipefail
cd "$(dirname "$0")/.."
script_start=$(date +%s)

# The steps' results, in order, for the summary at the end.
results=()
status=0

# step NAME CMD...: runs one step and prints its result and duration; a
# failure is recorded (the summary lists it, the exit status is 1) and the
# next steps run all the same.
step() {
  local name="$1" start rc=0 line
  shift
  start=$(date +%s)
  echo "=== test.sh: $name"
  "$@" || rc=$?
  if [ "$rc" != 0 ]; then
    line="FAILED  $name (exit $rc, $(($(date +%s) - start)) s)"
    status=1
  else
    line="ok      $name ($(($(date +%s) - start)) s)"
  fi
  echo "=== test.sh: $line"
  results+=("$line")
}

# skipped NAME WHY: records a step that did not run.
skipped() {
  echo "=== test.sh: $1: skipped ($2)"
  results+=("skipped $1 ($2)")
}

# gotest_logged ARGS...: go test ARGS, its output also kept in a file
# so that the summary can name the packages that failed.
gotest_log="$(mktemp "${TMPDIR:-/tmp}/dpstream-test.XXXXXX")"
gotest_logged() {
  go test "$@" 2>&1 | tee -a "$gotest_log"
}

# stop_brokers: on exit, the brokers (and the schema registry) this script
# started are stopped and their data deleted (kafka.sh reset; secure.sh
# stop deletes its own; the registry keeps its schemas in memory), so
# that the test topics of a run do not pile up in deploy/kafka/data; one
# that was already running is left as it is, and so are both with
# DPSTREAM_KEEP_BROKER=1. The jars stay cached in deploy/kafka/lib.
stop_brokers() {
  rm -f "$gotest_log"
  if [ "${DPSTREAM_KEEP_BROKER:-0}" = 1 ]; then return; fi
  if [ "${started_connect:-0}" = 1 ]; then deploy/connect/connect.sh stop || true; fi
  if [ "${started_pg:-0}" = 1 ]; then deploy/postgres/pg.sh reset || true; fi
  if [ "${started_secure:-0}" = 1 ]; then deploy/kafka/secure.sh stop || true; fi
  if [ "${started_registry:-0}" = 1 ]; then deploy/registry/registry.sh stop || true; fi
  if [ "${started_broker:-0}" = 1 ]; then deploy/kafka/kafka.sh reset || true; fi
}
trap stop_brokers EXIT

# start_with SCRIPT VAR STARTED: starts the broker of SCRIPT
# (deploy/kafka/kafka.sh or secure.sh) and exports VAR as what its `start`
# printed (the address, or the path of broker.json); STARTED names the
# variable that records whether this script started it (stop_brokers).
start_with() {
  local out
  if "$1" status >/dev/null 2>&1; then
    printf -v "$3" 0
  else
    printf -v "$3" 1
  fi
  out="$("$1" start)" || return 1
  export "$2=$out"
  echo "$2=$out"
}

# use_or_start WHAT VAR SCRIPT STARTED DETAIL: a server given in the
# environment (VAR set) is used as it is; otherwise SCRIPT, if present, is
# started as a step ("start WHAT (SCRIPT, DETAIL)") and VAR exported as what
# it printed (start_with).
use_or_start() {
  local what="$1" var="$2" script="$3" started="$4" detail="$5"
  if [ -n "${!var:-}" ]; then
    echo "=== test.sh: using $what of $var=${!var}"
  elif [ -x "$script" ]; then
    step "start $what ($script, $detail)" start_with "$script" "$var" "$started"
  fi
}

# The development broker (deploy/kafka/kafka.sh) on 127.0.0.1 at
# DPSTREAM_KAFKA_PORT (default 9092): the address the tests get is the one
# kafka.sh prints. Brokers given in the environment (DPSTREAM_TEST_BROKERS,
# DPSTREAM_TEST_SECURE_BROKER: e.g. those of another checkout, which this
# checkout's scripts did not start and would refuse to share the ports
# with) are used as they are. A broker that does not start is a failed
# step; the broker tests then skip, and every other step still runs.
use_or_start "the broker" DPSTREAM_TEST_BROKERS deploy/kafka/kafka.sh started_broker \
  "port ${DPSTREAM_KAFKA_PORT:-9092}"

# The TLS/SASL test broker (deploy/kafka/secure.sh): a second broker on
# 127.0.0.1, six ports from DPSTREAM_SECURE_KAFKA_PORT (default 9192-9197),
# fresh certificates and users at every start, for the operator's
# TestKafkaSecurity and TestKafkaMissingTopic (~9 s to start). Its
# addresses are in the broker.json it prints.
use_or_start "the TLS/SASL broker" DPSTREAM_TEST_SECURE_BROKER deploy/kafka/secure.sh started_secure \
  "ports from ${DPSTREAM_SECURE_KAFKA_PORT:-9192}"

# Kafka Connect and PostgreSQL, for the walkthrough's Connect variant
# (cmd/dpstream TestKafkaConnectPostgres: dpstream's JSON releases through
# the JDBC sink into a table): a standalone Connect worker
# (deploy/connect/connect.sh, REST on DPSTREAM_CONNECT_PORT, default 58083,
# against the first broker of DPSTREAM_TEST_BROKERS; ~400 MB from Maven
# Central on first use) and a private PostgreSQL cluster
# (deploy/postgres/pg.sh, DPSTREAM_PG_PORT, default 55432). The test gets
# their URLs in DPSTREAM_TEST_CONNECT and DPSTREAM_TEST_POSTGRES; given in
# the environment, they are used as they are. A start that fails is a
# failed step, and the test then skips.
if [ -n "${DPSTREAM_TEST_CONNECT:-}" ] || [ -n "${DPSTREAM_TEST_BROKERS:-}" ]; then
  export DPSTREAM_CONNECT_BOOTSTRAP="${DPSTREAM_TEST_BROKERS%%,*}"
  use_or_start "Kafka Connect" DPSTREAM_TEST_CONNECT deploy/connect/connect.sh started_connect \
    "port ${DPSTREAM_CONNECT_PORT:-58083}"
fi
use_or_start "PostgreSQL" DPSTREAM_TEST_POSTGRES deploy/postgres/pg.sh started_pg \
  "port ${DPSTREAM_PG_PORT:-55432}"
# The schema registry (deploy/registry/registry.sh: Apicurio Registry
# 2.6.13.Final, in memory, 127.0.0.1 at DPSTREAM_REGISTRY_PORT, default
# 8081) for the framed Avro test (operator TestKafkaRegistryAvro): ~140 MB
# from Maven Central once, then ready in ~10-20 s on the loaded machine.
use_or_start "the schema registry" DPSTREAM_TEST_REGISTRY deploy/registry/registry.sh started_registry \
  "port ${DPSTREAM_REGISTRY_PORT:-8081}"

# The Python consumer example (examples/python) is tested against the broker
# (internal/demo TestKafkaPythonConsumer): install its requirements into a
# cached venv and point the test at it. Without them that test skips.
pyvenv="${XDG_CACHE_HOME:-$HOME/.cache}/dpstream/pyvenv"
if command -v python3 >/dev/null 2>&1; then
  if ! "$pyvenv/bin/python" -c 'import kafka, msgpack' >/dev/null 2>&1; then
    { python3 -m venv "$pyvenv" && "$pyvenv/bin/pip" install -q -r examples/python/requirements.txt; } ||
      echo "test.sh: could not install examples/python/requirements.txt; the Python example's test will skip" >&2
  fi
  if "$pyvenv/bin/python" -c 'import kafka, msgpack' >/dev/null 2>&1; then
    export DPSTREAM_PYTHON="$pyvenv/bin/python"
  fi
fi

step "go vet" go vet ./...
step "go test ./..." gotest_logged -count=1 -timeout 20m ./...

# The deployment artefacts are Go modules of their own (outside ./...): the
# OCI image (builds it twice, ~1-3 min with a cold build cache) and the
# Kubernetes manifests (strict decoding against the API types).
# in_module DIR ARGS...: go vet and go test ARGS in the module at DIR.
in_module() {
  local dir="$1"
  shift
  (cd "$dir" && go vet ./... && gotest_logged "$@" ./...)
}
step "deploy/image: go vet, go test" in_module deploy/image -count=1 -timeout 15m
step "deploy/k8s: go vet, go test" in_module deploy/k8s -count=1 -timeout 10m
# The peer accuracy benchmark (internal/peers, a module of its own that
# imports Google's differential-privacy library; never a dependency of
# dpstream): its harness tests, in seconds with -short. The measurement
# itself is run by hand (docs/performance.md).
step "internal/peers: go vet, go test -short" in_module internal/peers -count=1 -short

# The race detector, over the tests that run dpstream's concurrent code:
# the operator's run loop (fetch goroutines, the core loop, scale-out's
# merge stage, the health server) on the in-process fake broker and on the
# real one (end to end, crash recovery, and the three scale-out tests that
# run its concurrent paths: two instances merging, a rebalance, the merger
# share; the other six scale-out tests run the same code in other orders of
# records and restarts, about 45 s more under -race), the demo's embedded
# run, and the schema decoders the fetchers run in parallel. Measured in a
# whole run of this script on the loaded 2-core machine: 76 s with the
# builds (operator 59 s, the rest 12 s). Left out, with no
# goroutine or shared state in their tests: ./windows (115 s under -race)
# and ./privacy (513 s; its caches are shared by the operator's goroutines
# and so raced in the operator tests above).
race() {
  local rc=0
  gotest_logged -race -count=1 -timeout 15m ./schema ./privacy/continual || rc=1
  gotest_logged -race -count=1 -timeout 15m \
    -run 'TestRunFakeBroker|TestBrokerUnreachable|TestKafkaEndToEnd|TestKafkaScaleOut(Equivalent|RebalanceSkipsFinalWindows|MergerShare)$|TestKafkaCrash|TestCompat' ./operator || rc=1
  gotest_logged -race -count=1 -timeout 15m -run 'TestDemoEmbedded' ./internal/demo || rc=1
  return "$rc"
}
if [ "${DPSTREAM_TEST_RACE:-1}" = 0 ]; then
  skipped "go test -race" "DPSTREAM_TEST_RACE=0"
else
  step "go test -race" race
fi

# Fuzz targets: a short, fixed budget each — a smoke run that every
# target still starts, replays its corpus and finds nothing quickly;
# longer runs are done by hand (docs/development.md). The budget is a
# count of executions, not a duration: with a duration, Go 1.26's fuzz
# coordinator can report a spurious "context deadline exceeded" at the
# deadline on a loaded machine (golang/go#75804, fixed in Go 1.27).
# Measured on the 2-core machine while loaded (2026-11-26): the schema and
# windows decoders run 10-30k executions/s, so 100000 take 4-10 s each.
# FuzzDecodeEquivalent runs two decoders and two encoders per input, about
# 100x slower, so it gets 5000. The operator's state-topic and partials
# readers start from the pinned records of operator/testdata/compat
# (kilobytes of JSON, reassembled chunks): FuzzDecodeState ran about 800
# executions/s (100000 took 125 s), FuzzReadIntent and
# FuzzDecodePartialChunk about 4000/s, so they get 20000 and 50000.
fuzz_budget() {
  case "$1" in
    FuzzDecodeEquivalent) echo 5000x ;;
    FuzzDecodeState) echo 20000x ;;
    FuzzReadIntent | FuzzDecodePartialChunk) echo 50000x ;;
    *) echo 100000x ;;
  esac
}
for pkg in ./schema ./windows ./operator; do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    step "fuzz $pkg $target ($(fuzz_budget "$target"))" \
      go test -run '^$' -fuzz "^${target}\$" -fuzztime "$(fuzz_budget "$target")" -parallel 2 "$pkg"
  done
done

# The summary: one line per step, then the packages whose tests failed.
echo
echo "=== test.sh: summary ($(($(date +%s) - script_start)) s)"
for line in "${results[@]}"; do echo "  $line"; done
failed_pkgs="$(grep -E '^FAIL[[:space:]]' "$gotest_log" 2>/dev/null | sort -u || true)"
if [ -n "$failed_pkgs" ]; then
  echo "  failed packages:"
  printf '%s\n' "$failed_pkgs" | sed 's/^/    /'
fi
if [ "$status" = 0 ]; then
  echo "=== test.sh: all steps ok"
else
  echo "=== test.sh: FAILED (see the steps above)"
fi
exit "$status"
