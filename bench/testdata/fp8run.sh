#!/bin/bash
# One device call for the fp8 GEMM (scaled_matmul, issue 14 item 3). Build here first, carry
# .dev/fp8 and run this from the repository root:
#
#   mkdir -p .dev/fp8
#   CGO_ENABLED=0 go build -ldflags="-s -w" -o .dev/fp8/tessera-qa ./cmd/tessera-qa
#   CGO_ENABLED=0 go test -c -ldflags="-s -w" -o .dev/fp8/bench.test ./bench
#   CGO_ENABLED=0 go test -c -ldflags="-s -w" -o .dev/fp8/golden.test ./suites/golden
#   CGO_ENABLED=0 go test -c -ldflags="-s -w" -o .dev/fp8/differential.test ./suites/differential
#   for v in 2 1 0; do TESSERA_PTX_FP8_SETS=$v .dev/fp8/tessera-qa compile --target ptx --arch sm_90a \
#     docs/examples/fp8gemm.tg > .dev/fp8/fp8_sets$v.ptx; done
#
# Order: ptxas (registers and spills of the three tilings), correctness on the GPU (the kernel
# against engine/ref, the golden cases, torch._scaled_mm through the differential suite), then
# the bench row with the default tiling and the two measurement knobs.
B=.dev/fp8
export PYTHONUNBUFFERED=1
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "== ptxas (sm_90a): 2 promotion sets (default), 1, 0 (fast accumulation)"
for v in 2 1 0; do ptxas -arch=sm_90a -v $B/fp8_sets$v.ptx -o /tmp/fp8_sets$v.cubin 2>&1 | grep -E "rror|Used|spill" | sed "s/^/sets$v: /"; done
echo "== kernel vs engine/ref ($(( $(date +%s) - T0 ))s)"
timeout 120 $B/bench.test -test.run TestGPUFP8GemmMatchesReference -test.v > $OUT/fp8_gpu.txt 2>&1; echo "rc $?"; grep -E "ulp|FAIL|PASS|differ|path" $OUT/fp8_gpu.txt
echo "== golden scaled_matmul on cuda ($(( $(date +%s) - T0 ))s)"
timeout 120 $B/golden.test -ginkgo.label-filter='scaled_matmul && gpu' -ginkgo.v > $OUT/fp8_golden.txt 2>&1; echo "rc $?"; grep -E "Ran |Passed|FAIL" $OUT/fp8_golden.txt
echo "== differential scaled_matmul vs torch on cuda ($(( $(date +%s) - T0 ))s)"
timeout 180 $B/differential.test -ginkgo.label-filter='scaled_matmul && gpu && torch' -ginkgo.v > $OUT/fp8_diff.txt 2>&1; echo "rc $?"; grep -E "Ran |Passed|FAIL|_scaled_mm" $OUT/fp8_diff.txt | head -20
echo "== bench fp8gemm ($(( $(date +%s) - T0 ))s)"
for v in 2 1 0; do
  TESSERA_PTX_FP8_SETS=$v timeout 120 $B/tessera-qa bench --vs torch --ops fp8gemm --seed 7 --json $OUT/bench_fp8_sets$v.json > $OUT/bench_fp8_sets$v.txt 2>&1
  echo "sets=$v rc $?"; grep -v "^\[" $OUT/bench_fp8_sets$v.txt | tail -6
done
echo "== done ($(( $(date +%s) - T0 ))s)"
