# common.sh — what deploy/kafka/kafka.sh and deploy/kafka/secure.sh write
# alike for a single-node KRaft test broker. Sourced, not run.

# single_node_properties DATA AUTO_CREATE prints the server.properties
# settings of a one-node test broker (data under DATA; AUTO_CREATE true or
# false for auto.create.topics.enable), after the listener settings.
single_node_properties() {
  cat <<PROPS
log.dirs=$1/kraft-combined-logs
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
min.insync.replicas=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=$2
delete.topic.enable=true
num.network.threads=2
num.io.threads=2
# No time-based retention: the tests produce records stamped with simulated
# arrival times in the past (CreateTime, e.g. 2024), which a time limit would
# delete at the broker's first retention check (30 s after start) while a
# test still reads them. Disk is bounded by size instead (256 MiB a partition).
log.retention.ms=-1
log.retention.bytes=268435456
log.segment.bytes=67108864
PROPS
}

# write_log4j DIR LOGFILE writes DIR/log4j.properties (the broker's log, to
# LOGFILE) and DIR/tools-log4j.properties (the command-line tools: errors
# only, to stderr).
write_log4j() {
  cat >"$1/log4j.properties" <<PROPS
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=$2
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=INFO
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.request.logger=WARN
PROPS
  cat >"$1/tools-log4j.properties" <<PROPS
log4j.rootLogger=ERROR, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=%p %m%n
PROPS
}

# The callers define say MESSAGE (to stderr, with their name), host and
# pidfile (and port, for running_or_free).

# need CMD WHY exits with a message unless CMD is on PATH.
need() {
  command -v "$1" >/dev/null 2>&1 || { say "$1 not found on PATH ($2)"; exit 1; }
}

# port_open PORT: true if something accepts TCP connections on $host:PORT.
port_open() { (exec 3<>"/dev/tcp/$host/$1") 2>/dev/null; }

# pid_alive: the process in $pidfile runs.
pid_alive() {
  [ -f "$pidfile" ] || return 1
  local pid
  pid="$(cat "$pidfile" 2>/dev/null || true)"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# api_versions_ok LIB CONFDIR BOOTSTRAP: the broker at BOOTSTRAP answers an
# ApiVersions round trip through the Kafka admin client (so it is
# registered with the controller, not merely listening).
api_versions_ok() {
  timeout 30 java -cp "$1/*" -Dlog4j.configuration="file:$2/tools-log4j.properties" \
    kafka.admin.BrokerApiVersionsCommand --bootstrap-server "$3" >/dev/null 2>&1
}

# running_or_free WHAT VAR OUT CHECK...: the head of a start. Prints OUT
# and returns 0 when the process of $pidfile runs and CHECK... succeeds
# (nothing to start). Exits 1 when $port is taken by a process this script
# did not start (VAR names the port's setting). Otherwise returns 1, after
# saying that the process runs but is not ready yet, or removing a stale
# $pidfile: the caller starts the process unless pid_alive.
running_or_free() {
  local what="$1" var="$2" out="$3"
  shift 3
  if pid_alive && "$@"; then
    echo "$out"
    return 0
  fi
  if ! pid_alive && port_open "$port"; then
    say "port $port is already in use by a process this script did not start; stop it or set $var"
    exit 1
  fi
  if pid_alive; then
    say "$what process $(cat "$pidfile") is running but not ready yet; waiting"
  else
    rm -f "$pidfile"
  fi
  return 1
}

# await_ready WHAT MISSING STDOUT CHECK...: after a start, waits until the
# command CHECK... succeeds, polling every half second. If the process of
# $pidfile exits first, says so with the last lines of $logfile (and of
# STDOUT, a file, unless empty) and exits 1; after $wait_s seconds, says
# "WHAT MISSING within …" and exits 1. The callers' say, $logfile,
# $pidfile and $wait_s are used as they are.
await_ready() {
  local what="$1" missing="$2" out="$3" deadline=$((SECONDS + wait_s))
  shift 3
  until "$@"; do
    if ! pid_alive; then
      say "$what exited during start-up; last lines of $logfile:"
      tail -n 30 "$logfile" >&2 || true
      if [ -n "$out" ]; then tail -n 10 "$out" >&2 || true; fi
      rm -f "$pidfile"
      exit 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      say "$what $missing within ${wait_s}s; see $logfile"
      exit 1
    fi
    sleep 0.5
  done
}

# stop_process WHAT: stops the process of $pidfile (kill_broker) and
# removes the file; "not running" if there is none.
stop_process() {
  if ! pid_alive; then
    rm -f "$pidfile"
    say "not running"
    return 0
  fi
  local pid
  pid="$(cat "$pidfile")"
  say "stopping $1 (pid $pid)"
  kill_broker "$pid"
  rm -f "$pidfile"
  say "stopped"
}

# kill_broker PID: SIGTERM, then SIGKILL if it still runs after 30 s (a
# clean shutdown of a test broker takes a few seconds).
kill_broker() {
  local i
  kill -TERM "$1" 2>/dev/null || true
  for i in $(seq 1 60); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$1" 2>/dev/null; then
    say "still running after 30s; sending SIGKILL"
    kill -KILL "$1" 2>/dev/null || true
  fi
}
