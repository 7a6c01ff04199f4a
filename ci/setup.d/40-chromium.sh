#!/usr/bin/env bash
# Headless Chromium for the dashboard's browser test (report/dashboard): Debian's
# chromium package and the DejaVu fonts the pages name. The test skips with a reason when
# /usr/bin/chromium is missing. On a fresh 2-core machine the install took 91 s (apt-get
# update included); when chromium is already there this script only
# checks that it starts, in under 1 s.
# Idempotent: a second run finds chromium in place and installs nothing.
set -euo pipefail

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi; }

if [ ! -x /usr/bin/chromium ]; then
  echo "installing chromium"
  start=$(date +%s)
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
  echo "chromium installed in $(($(date +%s) - start)) s"
fi

# A browser that is installed but cannot start (a missing shared library) should fail here,
# with its own message, not later inside a test.
/usr/bin/chromium --headless --no-sandbox --disable-gpu --no-first-run --version
