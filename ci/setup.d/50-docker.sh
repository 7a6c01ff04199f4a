#!/usr/bin/env bash
# Docker for the chaos suite's container scenarios (suites/chaos, label docker): Debian's
# docker.io (daemon 20.10), dockerd started in the background if none answers, then a check that
# it answers. Without it the docker specs skip with the reason. Idempotent: a second run finds
# the daemon up and only checks it. Uses the Debian client /usr/bin/docker (a newer client
# elsewhere on PATH may speak an API the 20.10 daemon does not).
set -euo pipefail

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi; }
docker=/usr/bin/docker

if [ ! -x /usr/sbin/dockerd ] || [ ! -x "$docker" ]; then
  echo "installing docker.io"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends docker.io >/dev/null
fi

if ! as_root "$docker" version >/dev/null 2>&1; then
  log=${TESSERA_CI_OUT:-/tmp}/dockerd.log
  echo "starting dockerd (log: $log)"
  as_root sh -c "nohup /usr/sbin/dockerd >'$log' 2>&1 &"
  for _ in $(seq 1 30); do as_root "$docker" version >/dev/null 2>&1 && break; sleep 1; done
fi
as_root "$docker" version --format 'docker daemon {{.Server.Version}} answers'
