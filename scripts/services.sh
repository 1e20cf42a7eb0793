#!/usr/bin/env bash
# Start (or stop) a Redis server and a PostgreSQL cluster on loopback for the tests of the
# queue (RQ) and PostgreSQL back-ends, from Debian's redis-server and postgresql packages.
#
#   eval "$(bash scripts/services.sh start)"   # prints the KERNELSCOPE_TEST_* exports
#   bash scripts/services.sh stop
#
# Everything lives under $KERNELSCOPE_SERVICES_DIR (default /tmp/kernelscope-services):
# Redis on 127.0.0.1:${KERNELSCOPE_REDIS_PORT:-6390} without persistence, with ACLs on: the
# `default` user is disabled and a `kernelscope` user has a random password (kept in
# redis.pass and redis.conf, mode 0600, and put in the URL, never on a command line), so a
# process on the host that can reach the port cannot enqueue anything without it
# (docs/security.md); PostgreSQL on
# 127.0.0.1:${KERNELSCOPE_PG_PORT:-5433} with a `kernelscope` user and database (trust
# authentication on loopback only: a test cluster, never a production one). PostgreSQL
# refuses to run as root, so as root the cluster belongs to the `postgres` user.
set -euo pipefail

DIR="${KERNELSCOPE_SERVICES_DIR:-/tmp/kernelscope-services}"
REDIS_PORT="${KERNELSCOPE_REDIS_PORT:-6390}"
PG_PORT="${KERNELSCOPE_PG_PORT:-5433}"
PGDATA="$DIR/pg"

pg_bin() {
  local found
  found="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
  [ -n "$found" ] || { echo "services: PostgreSQL is not installed" >&2; exit 1; }
  echo "$found"
}

as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

redis_pass() {
  if [ ! -s "$DIR/redis.pass" ]; then
    (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$DIR/redis.pass")
  fi
  cat "$DIR/redis.pass"
}

rcli() {  # the password in the environment, never in argv (ps shows argv to every user)
  REDISCLI_AUTH="$(redis_pass)" redis-cli -p "$REDIS_PORT" --user kernelscope "$@"
}

redis_conf() {  # the server's settings, its password included, in a file only we can read
  (umask 077; cat >"$DIR/redis.conf" <<CONF
port $REDIS_PORT
bind 127.0.0.1
protected-mode yes
save ""
appendonly no
daemonize yes
pidfile $DIR/redis.pid
logfile $DIR/redis.log
user default off
user kernelscope on >$1 ~* &* +@all
CONF
  )
}

start() {
  mkdir -p "$DIR"
  local pass
  pass="$(redis_pass)"
  if ! rcli ping >/dev/null 2>&1; then
    redis_conf "$pass"
    redis-server "$DIR/redis.conf" >&2
  fi
  local bin
  bin="$(pg_bin)"
  if [ ! -f "$PGDATA/PG_VERSION" ]; then
    mkdir -p "$PGDATA"
    [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$DIR" "$PGDATA"
    as_pg "$bin/initdb" -D "$PGDATA" -A trust -U postgres >"$DIR/initdb.log" 2>&1
  fi
  if ! as_pg "$bin/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1; then
    as_pg "$bin/pg_ctl" -D "$PGDATA" -l "$DIR/pg.log" -w -t 60 \
      -o "-p $PG_PORT -k $PGDATA -c listen_addresses=127.0.0.1 -c fsync=on" start >&2
  fi
  local psql=("$bin/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -qtA)
  if [ "$("${psql[@]}" -c "SELECT 1 FROM pg_roles WHERE rolname='kernelscope'")" != 1 ]; then
    "${psql[@]}" -c "CREATE ROLE kernelscope LOGIN" >&2
  fi
  if [ "$("${psql[@]}" -c "SELECT 1 FROM pg_database WHERE datname='kernelscope'")" != 1 ]; then
    "${psql[@]}" -c "CREATE DATABASE kernelscope OWNER kernelscope" >&2
  fi
  for _ in $(seq 50); do
    rcli ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  echo "export KERNELSCOPE_TEST_REDIS=redis://kernelscope:$pass@127.0.0.1:$REDIS_PORT/0"
  echo "export KERNELSCOPE_TEST_POSTGRES=postgresql://kernelscope@127.0.0.1:$PG_PORT/kernelscope"
}

stop() {
  rcli shutdown nosave >/dev/null 2>&1 || true
  if [ -f "$PGDATA/PG_VERSION" ]; then
    as_pg "$(pg_bin)/pg_ctl" -D "$PGDATA" -m fast stop >/dev/null 2>&1 || true
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
