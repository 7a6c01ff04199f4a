#!/usr/bin/env bash
# Docker for the chaos suite's container scenarios (suites/chaos, label docker): when no daemon
# answers, Debian's docker.io (daemon 20.10) is installed if missing and dockerd started in the
# background; then a check that it answers. Without a daemon the docker specs skip with the
# reason. Idempotent: a second run finds the daemon up and only checks it. Prefers the Debian
# client /usr/bin/docker (a newer client elsewhere on PATH may speak an API the 20.10 daemon
# does not); the tests themselves talk to the daemon through testcontainers-go.
set -euo pipefail

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi; }
docker=/usr/bin/docker
[ -x "$docker" ] || docker=$(command -v docker || true)

if [ -n "$docker" ] && as_root "$docker" version >/dev/null 2>&1; then
  as_root "$docker" version --format 'docker daemon {{.Server.Version}} answers'
  exit 0
fi
if ! command -v dockerd >/dev/null 2>&1 && [ ! -x /usr/sbin/dockerd ]; then
  echo "installing docker.io"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends docker.io >/dev/null
fi
docker=/usr/bin/docker
dockerd=$(command -v dockerd || echo /usr/sbin/dockerd)
log=${TESSERA_CI_OUT:-/tmp}/dockerd.log
echo "starting $dockerd (log: $log)"
as_root sh -c "nohup '$dockerd' >'$log' 2>&1 &"
for _ in $(seq 1 30); do as_root "$docker" version >/dev/null 2>&1 && break; sleep 1; done
as_root "$docker" version --format 'docker daemon {{.Server.Version}} answers'
