#!/bin/bash
# One device call for bench and the fast row kernels (docs/PERF.md, "H100 GPU: bench
# --vs torch"). Build here first, then carry .dev/bench and run this from the repository root:
#
#   mkdir -p .dev/bench/ptx
#   CGO_ENABLED=0 go build -ldflags="-s -w" -o .dev/bench/tessera-qa ./cmd/tessera-qa
#   CGO_ENABLED=0 go test -c -ldflags="-s -w" -o .dev/bench/bench.test ./bench
#   for each op in softmax log_softmax layernorm rmsnorm and dtype in f32 bf16, an 8192x8192
#   graph through: .dev/bench/tessera-qa compile --target ptx G > .dev/bench/ptx/OP_DT.ptx
#
# Order: ptxas and SASS of the row kernels (seconds), the golden row cases on the GPU, the
# memory-bound ops against the copy bandwidth, a SIMT A/B, then matmul and attention (a fault
# there cannot take the row results with it: separate processes).
B=.dev/bench
export PYTHONUNBUFFERED=1
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader
echo "== ptxas (sm_90)"
for f in $B/ptx/*.ptx; do n=$(basename $f .ptx); ptxas -arch=sm_90 -v $f -o /tmp/$n.cubin 2>&1 | grep -E "rror|Used|spill" | sed "s/^/$n: /"; done
cuobjdump -sass /tmp/softmax_bf16.cubin > $OUT/softmax_bf16.sass 2>&1
for n in softmax_f32 softmax_bf16 layernorm_bf16; do echo "$n SASS:" $(cuobjdump -sass /tmp/$n.cubin | grep -oE "LDG\.E[.0-9A-Z]*|STG\.E[.0-9A-Z]*|MUFU\.[A-Z0-9]+|BAR\.[A-Z]*|SHFL\.[A-Z]*|LDL|STL" | sort | uniq -c | tr '\n' ' '); done
echo "== golden row cases on the GPU ($(( $(date +%s) - T0 ))s)"
timeout 150 $B/bench.test -test.run TestGPURowKernelsMatchGolden -test.v > $OUT/rows_gpu.txt 2>&1; echo "rc $?"; tail -3 $OUT/rows_gpu.txt; grep -E "FAIL|differ" $OUT/rows_gpu.txt | head -20
echo "== bench: memory-bound ops ($(( $(date +%s) - T0 ))s)"
timeout 200 $B/tessera-qa bench --vs torch --ops copy,softmax,log_softmax,layernorm,rmsnorm,elementwise,reduce_sum --seed 1 --json $OUT/bench_rows.json > $OUT/bench_rows.txt 2>&1; echo "rc $?"; grep -v "^\[" $OUT/bench_rows.txt
echo "== SIMT A/B ($(( $(date +%s) - T0 ))s)"
TESSERA_PTX_ROWS=off timeout 60 $B/tessera-qa bench --vs torch --ops softmax --dtypes f32 --seed 1 > $OUT/bench_simt.txt 2>&1; echo "rc $?"; grep -E "^ *softmax" $OUT/bench_simt.txt
echo "== bench: matmul, attention ($(( $(date +%s) - T0 ))s)"
timeout 120 $B/tessera-qa bench --vs torch --ops matmul,batch_matmul,attention,attention_causal --seed 1 --json $OUT/bench_mm.json > $OUT/bench_mm.txt 2>&1; echo "rc $?"; grep -v "^\[" $OUT/bench_mm.txt | tail -20
echo "== done ($(( $(date +%s) - T0 ))s)"
