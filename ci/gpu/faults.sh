#!/usr/bin/env bash
# Runs on the GPU machine after ci/gpu/build.sh: the GPU golden specs of a failpoints build,
# first with no fault (must pass), then once per GPU code-generator fault (each must make them
# fail). Prints one line per fault and exits 1 if a fault goes uncaught or the baseline fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=.dev/gpu
if [ ! -d "$bin" ] && [ -f .dev/gpu.tgz ]; then tar -C .dev -xzf .dev/gpu.tgz; fi
t="$bin/faults/golden.test"
run() { (cd "$bin/faults" && TESSERA_FAILPOINTS="$1" ./golden.test -ginkgo.label-filter=gpu -ginkgo.no-color -ginkgo.succinct 2>&1); }
status=0
if out=$(run ""); then echo "baseline (no fault): pass"; else echo "baseline (no fault): FAIL"; echo "$out" | tail -5; status=1; fi
for f in ptx/store/boundary-mask-dropped ptx/load/barrier-dropped; do
  out=$(run "$f"); rc=$?
  failed=$(echo "$out" | grep -oE "[0-9]+ Failed" | tail -1)
  if [ $rc -ne 0 ]; then echo "$f: caught by the GPU golden specs ($failed)"; else echo "$f: NOT caught"; status=1; fi
done
exit $status
