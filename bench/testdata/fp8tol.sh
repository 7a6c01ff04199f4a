#!/bin/bash
# One device call that re-runs every fp8 check judged by the accumulator bound (harness/accum,
# docs/tolerances.md "Tensor-core accumulation"). Build here first, carry .dev/fp8tol, and run
# this from the repository root:
#
#   mkdir -p .dev/fp8tol
#   CGO_ENABLED=0 go build -ldflags="-s -w" -o .dev/fp8tol/tessera-qa ./cmd/tessera-qa
#   CGO_ENABLED=0 go test -c -ldflags="-s -w" -o .dev/fp8tol/bench.test ./bench
#   CGO_ENABLED=0 go test -c -ldflags="-s -w" -o .dev/fp8tol/golden.test ./suites/golden
#   CGO_ENABLED=0 go test -c -ldflags="-s -w" -o .dev/fp8tol/differential.test ./suites/differential
#
# Each step prints its exit status and the lines that matter; the full logs land in $OUT.
B=.dev/fp8tol
export PYTHONUNBUFFERED=1 TESSERA_QA_PYTHON=${TESSERA_QA_PYTHON:-/opt/torch/.venv/bin/python3}
T0=$(date +%s)
echo "== TestGPUFP8GemmMatchesReference"
timeout 300 $B/bench.test -test.run 'TestGPUFP8GemmMatchesReference|TestH100ErrorsFitTheBudget' -test.v > $OUT/fp8_gpu.txt 2>&1; echo "rc $?"
grep -E "^(---|ok|FAIL)|max .* ulp|err/budget|\[[0-9]+,[0-9]+\]" $OUT/fp8_gpu.txt | head -30
echo "== golden scaled_matmul on cuda ($(( $(date +%s) - T0 ))s)"
timeout 120 $B/golden.test -ginkgo.label-filter=gpu -ginkgo.focus=scaled_matmul -ginkgo.no-color > $OUT/fp8_golden.txt 2>&1; echo "rc $?"
grep -E "^Ran|Passed|\[FAIL\]|out of tolerance" $OUT/fp8_golden.txt | head -20
echo "== differential scaled_matmul on cuda ($(( $(date +%s) - T0 ))s)"
timeout 180 $B/differential.test -ginkgo.label-filter=gpu -ginkgo.focus=scaled_matmul -ginkgo.no-color > $OUT/fp8_diff.txt 2>&1; echo "rc $?"
grep -E "^Ran|Passed|\[FAIL\]|out of tolerance" $OUT/fp8_diff.txt | head -20
echo "== bench fp8gemm ($(( $(date +%s) - T0 ))s)"
timeout 240 $B/tessera-qa bench --vs torch --ops fp8gemm --seed 1 --json $OUT/bench_fp8.json > $OUT/bench_fp8.txt 2>&1; echo "rc $?"
grep -v "^\[" $OUT/bench_fp8.txt | tail -12
echo "== done ($(( $(date +%s) - T0 ))s)"
