#!/usr/bin/env bash
# pg.sh — a private PostgreSQL cluster on 127.0.0.1 for dpstream's
# integration tests (the JDBC sink of the Kafka Connect walkthrough writes
# releases into it).
#
#   deploy/postgres/pg.sh start    initdb if needed, start, wait until ready; prints the
#                                  connection URL (postgresql://postgres@127.0.0.1:PORT/postgres)
#   deploy/postgres/pg.sh stop     stop the server started by this script (fast shutdown)
#   deploy/postgres/pg.sh status   say whether it runs; exit 0 if it answers, 1 if not
#   deploy/postgres/pg.sh reset    stop and delete the cluster's data
#   deploy/postgres/pg.sh psql ARGS...
#                                  psql against this server as user postgres
#
# Needs PostgreSQL's server programs (initdb, pg_ctl: on PATH, or Debian's
# /usr/lib/postgresql/<v>/bin from apt-get install postgresql) and psql. The cluster
# lives in deploy/postgres/data, its log in deploy/postgres/postgres.log (both
# git-ignored); it listens only on 127.0.0.1 and a socket in the data folder,
# and trusts local connections (a test database: no password). PostgreSQL
# refuses to run as root: as root this script runs the server as the user
# DPSTREAM_PG_USER (default postgres), which then owns the data folder.
#
# Environment (all optional):
#   DPSTREAM_PG_PORT   port (default 55432)
#   DPSTREAM_PG_USER   the system user that runs the server when this script runs as root (default postgres)
#   DPSTREAM_PG_WAIT   seconds to wait for readiness (default 60)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
data="$here/data"
logfile="$here/postgres.log"
port="${DPSTREAM_PG_PORT:-55432}"
wait_s="${DPSTREAM_PG_WAIT:-60}"
host=127.0.0.1
url="postgresql://postgres@$host:$port/postgres"

say() { echo "pg.sh: $*" >&2; }
# need and port_open, shared with the broker scripts.
# shellcheck source=../kafka/common.sh
. "$here/../kafka/common.sh"

# Debian installs the server programs outside PATH.
if ! command -v pg_ctl >/dev/null 2>&1; then
  for d in /usr/lib/postgresql/*/bin; do
    if [ -x "$d/pg_ctl" ]; then PATH="$d:$PATH"; fi
  done
fi

# as: runs a command as the server's user (root cannot run PostgreSQL).
as=()
if [ "$(id -u)" = 0 ]; then
  as=(runuser -u "${DPSTREAM_PG_USER:-postgres}" --)
fi

# server_pid: the postmaster's own pid, from the first line of
# postmaster.pid (written by the server itself); empty if it does not run.
server_pid() {
  local pid
  [ -f "$data/postmaster.pid" ] || return 0
  pid="$(head -n 1 "$data/postmaster.pid" 2>/dev/null || true)"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then echo "$pid"; fi
}

ready() { pg_isready -q -h "$host" -p "$port" -U postgres 2>/dev/null; }

init_cluster() {
  if [ -f "$data/PG_VERSION" ]; then return; fi
  need initdb "PostgreSQL's server programs are needed (Debian: apt-get install postgresql)"
  say "creating a cluster in $data"
  mkdir -p "$data"
  if [ ${#as[@]} -gt 0 ]; then chown "${DPSTREAM_PG_USER:-postgres}" "$data"; fi
  chmod 700 "$data"
  "${as[@]}" initdb -D "$data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
}

start() {
  need pg_ctl "PostgreSQL's server programs are needed (Debian: apt-get install postgresql)"
  need psql "psql is needed to query the server"
  if [ -n "$(server_pid)" ] && ready; then
    echo "$url"
    return 0
  fi
  if [ -z "$(server_pid)" ] && port_open "$port"; then
    say "port $port is already in use by a process this script did not start; stop it or set DPSTREAM_PG_PORT"
    exit 1
  fi
  init_cluster
  if [ -z "$(server_pid)" ]; then
    say "starting PostgreSQL on $host:$port (log: $logfile)"
    : >>"$logfile"
    if [ ${#as[@]} -gt 0 ]; then chown "${DPSTREAM_PG_USER:-postgres}" "$logfile"; fi
    # -w: pg_ctl waits for the server; the server detaches from this shell
    # (pg_ctl starts it in its own session), its pid is in postmaster.pid.
    "${as[@]}" pg_ctl -D "$data" -l "$logfile" -w -t "$wait_s" \
      -o "-c listen_addresses=$host -p $port -k $data -c fsync=off -c max_connections=20 -c shared_buffers=16MB" start >/dev/null
  fi
  local deadline=$((SECONDS + wait_s))
  until ready; do
    if [ -z "$(server_pid)" ]; then
      say "the server exited during start-up; last lines of $logfile:"
      tail -n 20 "$logfile" >&2 || true
      exit 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      say "the server did not answer on $host:$port within ${wait_s}s; see $logfile"
      exit 1
    fi
    sleep 0.5
  done
  say "ready (pid $(server_pid))"
  echo "$url"
}

stop() {
  local pid i
  pid="$(server_pid)"
  if [ -z "$pid" ]; then
    say "not running"
    return 0
  fi
  say "stopping PostgreSQL (pid $pid)"
  kill -INT "$pid" 2>/dev/null || true # fast shutdown
  for i in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "still running after 30s; sending SIGQUIT"
    kill -QUIT "$pid" 2>/dev/null || true
  fi
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status)
  if [ -n "$(server_pid)" ] && ready; then
    say "running (pid $(server_pid)) on $host:$port"
  else
    say "not running"
    exit 1
  fi
  ;;
reset)
  stop
  rm -rf "$data"
  ;;
psql)
  shift
  exec psql -X -q -h "$host" -p "$port" -U postgres -d postgres "$@"
  ;;
*)
  echo "usage: $0 start|stop|status|reset|psql ARGS..." >&2
  exit 2
  ;;
esac
