#!/usr/bin/env bash
# Runs on the GPU machine after ci/gpu/build.sh: the planted faults only a GPU shows, each against
# the suite that must catch it (docs/mutations.md, "Faults only a GPU catches"):
#   - the GPU golden specs of a failpoints build, first with no fault (must pass), then once per
#     GPU code-generator fault (each must make them fail);
#   - the partitions suite's golden-on-partitions spec against a reduction tiling taken from the
#     SM count (the spec sets the failpoint in its children and must see the bits differ);
#   - stress's device-leak test against device buffers kept per run (the allocator's live-bytes
#     monitor must call it a leak with every result right);
#   - suites/sanitizer's planted specs: a store one element past the output (memcheck must
#     report the write in a kernel) and the fast reduction's barrier dropped (racecheck must
#     report the shared-memory race).
# Prints one line per fault and exits 1 if a fault goes uncaught or the baseline fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=.dev/gpu
# build.sh leaves a tarball (what travels to the GPU machine); unpack it once (xz, or Python's
# lzma where the machine has no xz).
if [ ! -d "$bin" ] && [ -f .dev/gpu.txz ]; then
  xz -dc .dev/gpu.txz 2>/dev/null | tar -C .dev -xf - ||
    python3 -c 'import tarfile; tarfile.open(".dev/gpu.txz").extractall(".dev")'
fi
run() { (cd "$bin/faults" && TESSERA_FAILPOINTS="$1" ./golden.test -ginkgo.label-filter=gpu -ginkgo.no-color -ginkgo.succinct 2>&1); }
status=0
if out=$(run ""); then echo "baseline (no fault): pass"; else echo "baseline (no fault): FAIL"; echo "$out" | tail -5; status=1; fi
for f in ptx/store/boundary-mask-dropped ptx/load/barrier-dropped; do
  out=$(run "$f"); rc=$?
  failed=$(echo "$out" | grep -oE "[0-9]+ Failed" | tail -1)
  if [ $rc -ne 0 ]; then echo "$f: caught by the GPU golden specs ($failed)"; else echo "$f: NOT caught"; status=1; fi
done
# The partitions spec passes only when the planted tiling is seen (it asserts the difference),
# so here a pass is the catch; the failpoint is set in its children, not in this process.
f=cuda/schedule/reduce-tile-from-sm-count
if out=$(cd "$bin/faults" && ./partitions.test -ginkgo.label-filter=gpu -ginkgo.focus=planted -ginkgo.v -ginkgo.no-color 2>&1) &&
   line=$(echo "$out" | grep -m1 "planted $f"); then
  echo "$f: caught by suites/partitions (${line#*: })"
else
  echo "$f: NOT caught"; echo "$out" | tail -8; status=1
fi
# Likewise the stress test passes only when the monitor calls the planted leak.
f=cuda/run/buffers-kept-per-run
if out=$(cd "$bin/faults" && ./stress.test -test.run 'DeviceBufferLeak' -test.v 2>&1) && echo "$out" | grep -q -- "--- PASS"; then
  echo "$f: caught by stress's allocator live-bytes monitor"
else
  echo "$f: NOT caught"; echo "$out" | tail -8; status=1
fi
# The sanitizer's planted faults: each spec passes only when its tool reports the fault in a
# kernel (memcheck: a __global__ write past the output; racecheck: a __shared__ race), so a
# pass is the catch. ci/gpu/sanitizer.sh runs the same specs after the clean tool runs.
for f in ptx/store/one-past-the-end ptx/reduce/combine-barrier-dropped; do
  if out=$(cd "$bin/sanitizer" && TESSERA_SANITIZER_OUT=/tmp/faults-sanitizer TESSERA_SANITIZER_PER_PATH=1 \
      ./sanitizer.test -ginkgo.label-filter=gpu -ginkgo.focus="catches $f" -ginkgo.v -ginkgo.no-color 2>&1) &&
     line=$(echo "$out" | grep -m1 "planted $f: caught"); then
    echo "$f: ${line#*planted $f: }"
  else
    echo "$f: NOT caught"; echo "$out" | grep -E "planted|FAIL|SKIP|Expected" | tail -6; status=1
  fi
done
exit $status
