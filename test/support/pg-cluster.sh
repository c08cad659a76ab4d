#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests: `start DIR` runs initdb in DIR
# (as the postgres user when we are root: the server refuses to run as root),
# starts the server on a unix socket in DIR and on 127.0.0.1 (a free port), and
# prints the superuser's URL; `stop DIR` stops it and removes DIR. Local (unix
# socket) logins are trusted; TCP logins need a password (scram-sha-256).
set -euo pipefail
cmd=${1:?start|stop}
dir=${2:?directory}
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
  echo "pg-cluster: no PostgreSQL server here (apt-get install postgresql)" >&2
  exit 2
fi
as_owner() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
case $cmd in
start)
  mkdir -p "$dir"
  # 0755: the socket's directory is reachable by anyone, so that only Vak's own walls keep a sandbox away from it.
  chmod 0755 "$dir"
  [ "$(id -u)" = 0 ] && chown postgres: "$dir"
  port=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
  as_owner "$bindir/initdb" -D "$dir/data" -U postgres --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-k $dir -p $port -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=on -c synchronous_commit=on" start >/dev/null \
    || { cat "$dir/server.log" >&2; exit 1; }
  echo "postgres://postgres@localhost:$port/postgres?host=$dir"
  ;;
stop)
  if [ -d "$dir/data" ]; then as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true; fi
  rm -rf "$dir"
  ;;
*) echo "pg-cluster: start DIR | stop DIR" >&2; exit 2 ;;
esac
