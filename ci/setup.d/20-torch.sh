#!/usr/bin/env bash
# PyTorch for the differential oracle (suites/differential, `tessera-qa diff`): Debian's
# python3-torch (torch 1.13, CPU only) and python3-numpy, installed into /usr/bin/python3.
# The python3 first on PATH may be another interpreter without torch, so the tests are pointed
# at this one through TESSERA_QA_PYTHON (which also makes a missing torch fail, not skip).
# Idempotent: apt runs only when torch does not import yet.
set -euo pipefail
py=/usr/bin/python3
if ! "$py" -c 'import torch, numpy' >/dev/null 2>&1; then
  sudo=()
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then sudo=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends python3-torch python3-numpy >/dev/null
fi
"$py" -c 'import sys, torch, numpy; print("torch", torch.__version__, "numpy", numpy.__version__, "under", sys.executable)'
if [ -n "${TESSERA_CI_OUT:-}" ]; then
  echo "TESSERA_QA_PYTHON=$py" >>"$TESSERA_CI_OUT/setup.env"
fi
