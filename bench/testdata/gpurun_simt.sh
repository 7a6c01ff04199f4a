#!/bin/bash
# Device calls for the general path at the memory limit (issue 14 item 1): the stream,
# reduction and transpose lowerings (engine/compiler/ptx/stream.go, reduce_fast.go,
# transpose.go). Build here first (about 90 MB, 40 MB packed: carry the archive):
#
#   mkdir -p .dev/simt/ptx
#   CGO_ENABLED=0 go build -ldflags="-s -w" -o .dev/simt/tessera-qa ./cmd/tessera-qa
#   CGO_ENABLED=0 go test -c -ldflags="-s -w" -o .dev/simt/bench.test ./bench
#   for s in golden rounding determinism; do
#     CGO_ENABLED=0 go test -c -ldflags="-s -w" -o .dev/simt/$s.test ./suites/$s; done
#   bash bench/testdata/gpurun_simt_ptx.sh     # writes .dev/simt/ptx/*.ptx
#   tar czf .dev/simt.tgz -C .dev simt
#
# then, carrying .dev/simt.tgz, from the repository root (each under the 10-minute limit):
#
#   tar xzf .dev/simt.tgz -C .dev && bash bench/testdata/gpurun_simt.sh bench
#   tar xzf .dev/simt.tgz -C .dev && bash bench/testdata/gpurun_simt.sh specs
#
# bench: ptxas and SASS of the 8192^2 kernels (an assembler error shows first), the new
# lowerings against the CPU backend bit for bit, the bench rows against the copy bandwidth,
# then the same rows with the lowerings off (the A/B). specs: the GPU golden, rounding and
# determinism specs (every op of the catalogue now runs on the new paths).
B=.dev/simt
export PYTHONUNBUFFERED=1
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
if [ "$1" != specs ]; then
echo "== ptxas (sm_90a)"
for f in $B/ptx/*.ptx; do n=$(basename $f .ptx); ptxas -arch=sm_90a -v $f -o /tmp/$n.cubin 2>&1 | grep -E "rror|Used|spill" | sed "s/^/$n: /"; done
for f in $B/ptx/*.ptx; do n=$(basename $f .ptx); echo "$n SASS:" $(cuobjdump -sass /tmp/$n.cubin | grep -oE "LDG\.E[.0-9A-Z]*|STG\.E[.0-9A-Z]*|LDS[.0-9A-Z]*|STS[.0-9A-Z]*|BAR\.[A-Z]*|LDL|STL|DADD|DFMA|DMUL|MUFU\.[A-Z0-9]+" | sort | uniq -c | tr '\n' ' '); done
echo "== the new lowerings against the CPU backend, bit for bit ($(( $(date +%s) - T0 ))s)"
timeout 120 $B/bench.test -test.run TestGPUStreamKernelsMatchCPU -test.v > $OUT/stream_gpu.txt 2>&1; echo "rc $?"; grep -E "^(---|    ---|ok|FAIL|PASS)|gpu 0x" $OUT/stream_gpu.txt | head -30
echo "== bench: memory-bound rows ($(( $(date +%s) - T0 ))s)"
OPS=copy,cast,elementwise,reduce_sum,reduce_max,reduce_sum_cols,reduce_max_cols,transpose
timeout 200 $B/tessera-qa bench --vs torch --ops $OPS --seed 1 --json $OUT/bench_simt.json > $OUT/bench_simt.txt 2>&1; echo "rc $?"; grep -v "^\[" $OUT/bench_simt.txt
echo "== the same rows on the SIMT path ($(( $(date +%s) - T0 ))s)"
TESSERA_PTX_STREAM=off timeout 200 $B/tessera-qa bench --vs torch --ops $OPS --seed 1 > $OUT/bench_simt_off.txt 2>&1; echo "rc $?"; grep -v "^\[" $OUT/bench_simt_off.txt
fi
if [ "$1" != bench ]; then
echo "== GPU specs ($(( $(date +%s) - T0 ))s)"
for s in golden rounding determinism; do
  timeout 170 $B/$s.test -ginkgo.label-filter=gpu > $OUT/$s.txt 2>&1; echo "$s rc $?"; grep -E "Ran [0-9]+ of|FAIL" $OUT/$s.txt | head -8
done
fi
echo "== done ($(( $(date +%s) - T0 ))s)"
