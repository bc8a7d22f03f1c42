#!/usr/bin/env bash
# Runs dpstream's whole test suite: starts the project's own Apache Kafka
# broker (KRaft, 127.0.0.1:9092, fetched from Maven Central on first use) so
# that the broker integration tests run too, then runs every Go test, the
# race detector over the concurrent code's tests, and a short fuzz of every
# fuzz target. Each step prints its result and duration; the first failure
# stops the script. DPSTREAM_TEST_RACE=0 skips the race step (quicker local
# runs; CI runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
script_start=$(date +%s)

# step NAME CMD...: runs one step and prints its result and duration; a
# failure ends the script with the step's exit status.
step() {
  local name="$1" start rc=0
  shift
  start=$(date +%s)
  echo "=== test.sh: $name"
  "$@" || rc=$?
  if [ "$rc" != 0 ]; then
    echo "=== test.sh: $name: FAILED (exit $rc, $(($(date +%s) - start)) s)"
    exit "$rc"
  fi
  echo "=== test.sh: $name: ok ($(($(date +%s) - start)) s)"
}

stop_brokers() {
  if [ "${DPSTREAM_KEEP_BROKER:-0}" = 1 ]; then return; fi
  if [ "${started_secure:-0}" = 1 ]; then deploy/kafka/secure.sh stop || true; fi
  if [ "${started_broker:-0}" = 1 ]; then deploy/kafka/kafka.sh stop || true; fi
}
trap stop_brokers EXIT

# The brokers are stopped again on exit when this script started them (see
# stop_brokers above); one that was already running is left running, and so
# are both with DPSTREAM_KEEP_BROKER=1 (quicker re-runs). Brokers given in
# the environment (DPSTREAM_TEST_BROKERS, DPSTREAM_TEST_SECURE_BROKER: e.g.
# those of another checkout, which this checkout's scripts did not start
# and would refuse to share the ports with) are used as they are.
if [ -n "${DPSTREAM_TEST_BROKERS:-}" ]; then
  echo "=== test.sh: using the brokers of DPSTREAM_TEST_BROKERS=$DPSTREAM_TEST_BROKERS"
elif [ -x deploy/kafka/kafka.sh ]; then
  if deploy/kafka/kafka.sh status >/dev/null 2>&1; then
    started_broker=0
  else
    started_broker=1
  fi
  deploy/kafka/kafka.sh start
  export DPSTREAM_TEST_BROKERS="${DPSTREAM_TEST_BROKERS:-127.0.0.1:9092}"
fi

# The TLS/SASL test broker (deploy/kafka/secure.sh): a second broker on
# 127.0.0.1:9192-9197, fresh certificates and users at every start, for the
# operator's TestKafkaSecurity and TestKafkaMissingTopic (~9 s to start).
if [ -n "${DPSTREAM_TEST_SECURE_BROKER:-}" ]; then
  echo "=== test.sh: using the TLS/SASL broker of DPSTREAM_TEST_SECURE_BROKER=$DPSTREAM_TEST_SECURE_BROKER"
elif [ -x deploy/kafka/secure.sh ]; then
  if deploy/kafka/secure.sh status >/dev/null 2>&1; then
    started_secure=0
  else
    started_secure=1
  fi
  secure_json="$(deploy/kafka/secure.sh start)"
  export DPSTREAM_TEST_SECURE_BROKER="$secure_json"
fi

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
step "go test ./..." go test -count=1 -timeout 20m ./...

# The deployment artefacts are Go modules of their own (outside ./...): the
# OCI image (builds it twice, ~1-3 min with a cold build cache) and the
# Kubernetes manifests (strict decoding against the API types).
step "deploy/image: go vet, go test" sh -c 'cd deploy/image && go vet ./... && go test -count=1 -timeout 15m ./...'
step "deploy/k8s: go vet, go test" sh -c 'cd deploy/k8s && go vet ./... && go test -count=1 -timeout 10m ./...'
# The peer accuracy benchmark (internal/peers, a module of its own that
# imports Google's differential-privacy library; never a dependency of
# dpstream): its harness tests, in seconds with -short. The measurement
# itself is run by hand (docs/performance.md).
step "internal/peers: go vet, go test -short" sh -c 'cd internal/peers && go vet ./... && go test -count=1 -short ./...'

# The race detector, over the tests that run dpstream's concurrent code:
# the operator's run loop (fetch goroutines, the core loop, scale-out's
# merge stage, the health server) on the in-process fake broker and on the
# real one (end to end, scale-out, crash recovery), the demo's embedded
# run, and the schema decoders the fetchers run in parallel. Measured in a
# whole run of this script on the loaded 2-core machine: 76 s with the
# builds (operator 59 s, the rest 12 s). Left out, with no
# goroutine or shared state in their tests: ./windows (115 s under -race)
# and ./privacy (513 s; its caches are shared by the operator's goroutines
# and so raced in the operator tests above).
race() {
  go test -race -count=1 -timeout 15m ./schema ./privacy/continual &&
    go test -race -count=1 -timeout 15m \
      -run 'TestRunFakeBroker|TestBrokerUnreachable|TestKafkaEndToEnd|TestKafkaScaleOut|TestKafkaCrash|TestCompat' ./operator &&
    go test -race -count=1 -timeout 15m -run 'TestDemoEmbedded' ./internal/demo
}
if [ "${DPSTREAM_TEST_RACE:-1}" = 0 ]; then
  echo "=== test.sh: go test -race: skipped (DPSTREAM_TEST_RACE=0)"
else
  step "go test -race" race
fi

# Fuzz targets: a short, fixed budget each (longer runs are done by hand).
# The budget is a count of executions, not a duration: with a duration, Go
# 1.26's fuzz coordinator can report a spurious "context deadline exceeded"
# at the deadline on a loaded machine (golang/go#75804, fixed in Go 1.27).
# FuzzDecodeEquivalent runs two decoders and two encoders per input, about
# 100x slower than the others, so it gets a smaller count. The operator's
# state-topic and partials readers (FuzzDecodeState, FuzzReadIntent,
# FuzzDecodePartialChunk) start from the pinned records of
# operator/testdata/compat (kilobytes of JSON, reassembled chunks): 300000
# executions took 33-54 s each on the loaded 2-core CI machine, so they get
# a third of that (13-21 s each; the first also builds the instrumented
# operator test binary, ~2 min cold).
fuzz_budget() {
  case "$1" in
    FuzzDecodeEquivalent) echo 5000x ;;
    FuzzDecodeState | FuzzReadIntent | FuzzDecodePartialChunk) echo 100000x ;;
    *) echo 300000x ;;
  esac
}
for pkg in ./schema ./windows ./operator; do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    step "fuzz $pkg $target ($(fuzz_budget "$target"))" \
      go test -run '^$' -fuzz "^${target}\$" -fuzztime "$(fuzz_budget "$target")" -parallel 2 "$pkg"
  done
done
echo "=== test.sh: all steps ok ($(($(date +%s) - script_start)) s)"
