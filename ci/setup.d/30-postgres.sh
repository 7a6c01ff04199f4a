#!/usr/bin/env bash
# PostgreSQL for the report store's tests (report/store): Debian's postgresql, one
# cluster listening on 127.0.0.1 only, a role and a database for the tests. Exports
# TESSERA_PG_URL into $TESSERA_CI_OUT/setup.env; without it the PostgreSQL specs skip.
# Idempotent: a second run finds everything in place and only checks that it answers.
set -euo pipefail

port=${TESSERA_PG_PORT:-5432}
user=tessera
db=tessera_test
pass=tessera-ci

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi; }

if ! command -v pg_lsclusters >/dev/null 2>&1; then
  echo "installing postgresql"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends postgresql >/dev/null
fi

# The newest installed major version and its cluster.
ver=$(pg_lsclusters -h | awk '{print $1}' | sort -n | tail -1)
if [ -z "$ver" ]; then
  ver=$(ls /usr/lib/postgresql | sort -n | tail -1)
  as_root pg_createcluster "$ver" main -- --auth-local=peer >/dev/null
fi
cluster="$ver main"

# Loopback only: the store's tests never need more, and CI machines should not expose it.
# A drop-in (Debian's postgresql.conf includes conf.d last) keeps the packaged file untouched.
as_root pg_conftool $cluster remove listen_addresses 2>/dev/null || true
conf=/etc/postgresql/$ver/main/conf.d/30-tessera.conf
want=$(printf "listen_addresses = '127.0.0.1'\nport = %s\n" "$port")
if [ "$(cat "$conf" 2>/dev/null)" != "$want" ]; then
  printf '%s\n' "$want" | as_root tee "$conf" >/dev/null
  as_root pg_ctlcluster $cluster stop >/dev/null 2>&1 || true
fi
if ! pg_lsclusters -h | awk -v v="$ver" '$1==v && $2=="main" {print $4}' | grep -q online; then
  as_root pg_ctlcluster $cluster start
fi

psql_admin() { as_root su postgres -c "psql -p $port -v ON_ERROR_STOP=1 -qtAX $(printf '%q ' "$@")"; }
for _ in $(seq 1 30); do psql_admin -c 'SELECT 1' >/dev/null 2>&1 && break; sleep 1; done

if [ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname='$user'")" != 1 ]; then
  psql_admin -c "CREATE ROLE $user LOGIN PASSWORD '$pass'"
fi
if [ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname='$db'")" != 1 ]; then
  psql_admin -c "CREATE DATABASE $db OWNER $user"
fi

url="postgres://$user:$pass@127.0.0.1:$port/$db?sslmode=disable"
PGPASSWORD=$pass psql "host=127.0.0.1 port=$port user=$user dbname=$db" -qtAX -c 'SELECT 1' >/dev/null
echo "postgres $ver listening on 127.0.0.1:$port"
if [ -n "${TESSERA_CI_OUT:-}" ]; then
  echo "TESSERA_PG_URL=$url" >>"$TESSERA_CI_OUT/setup.env"
fi
