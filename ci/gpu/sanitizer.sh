#!/usr/bin/env bash
# Runs on the GPU machine after ci/gpu/build.sh: suites/sanitizer, our kernels under NVIDIA
# compute-sanitizer's memcheck, racecheck, initcheck and synccheck (each a child process: the
# suite binary started again under the tool), then the two planted code-generator faults, each
# of which its tool must report. Writes under $OUT/sanitizer (or gpu-out/sanitizer): one log per
# tool run (the tool's whole output), summary.json (which tools ran, which the machine refused
# with the tool's own line, every finding with its kernel and access), planted-*.json, the
# Ginkgo JSON report and suite.log. Exit 0 only when every tool ran clean and both faults were
# caught.
#
# Time: it must fit one 10-minute device command. The case set is one ragged case per PTX
# generator path (TESSERA_SANITIZER_PER_PATH=1: the dedicated 130x200x72 bf16 GEMM, a 68x132
# transpose and a 7x13 elementwise op, then catalogue cases for the SIMT, stream, row,
# reduction, mma.sync, wgmma attention and fp8 GEMM paths: 9 cases; 2 per path gives 15),
# each tool bounded to TESSERA_SANITIZER_TIMEOUT s (default 100) and each planted run to 60 s:
# at most 4 x 100 + 2 x 60 = 520 s, under the whole script's SANITIZER_LIMIT (550 s).
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=.dev/gpu
if [ ! -d "$bin" ] && [ -f .dev/gpu.txz ]; then
  xz -dc .dev/gpu.txz 2>/dev/null | tar -C .dev -xf - ||
    python3 -c 'import tarfile; tarfile.open(".dev/gpu.txz").extractall(".dev")'
fi
out=${OUT:-gpu-out}/sanitizer
mkdir -p "$out"
out=$(cd "$out" && pwd)
export TESSERA_SANITIZER_OUT="$out"
export TESSERA_SANITIZER_PER_PATH="${TESSERA_SANITIZER_PER_PATH:-1}"
export TESSERA_SANITIZER_TIMEOUT="${TESSERA_SANITIZER_TIMEOUT:-100}"
command -v compute-sanitizer >/dev/null || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | tail -1
(cd "$bin/sanitizer" && timeout -k 10 "${SANITIZER_LIMIT:-550}" ./sanitizer.test -ginkgo.label-filter=gpu -ginkgo.v \
   -ginkgo.no-color -ginkgo.json-report="$out/ginkgo.json") > "$out/suite.log" 2>&1
rc=$?
grep -E "^  (memcheck|racecheck|initcheck|synccheck|planted|summary)|SKIPPED\] [^S]|Passed|Ran " "$out/suite.log"
[ -f "$out/summary.json" ] && python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
print("sanitizer:", s["verdict"], "ran", s["ran"], "refused", s["refused"], "cases", len(s["cases"]))
for t in s["tools"]:
    print(" ", t["tool"], t["status"], "%.0fs" % t["seconds"], t.get("reason", "")[:300])
' "$out/summary.json"
exit $rc
