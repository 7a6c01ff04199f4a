#!/usr/bin/env bash
# One device call for the dedicated matmul kernels (docs/ptx.md): resources and SASS of each
# 4096^3 tiling, the ragged-shape check against the CPU backend, then the timings vs torch.
# Usage (GPU machine, repo root): bash engine/compiler/ptx/testdata/gemmrun.sh .dev/g
# Builds nothing: the bundle comes from TestWriteGemmBundle on the development machine.
set -o pipefail
B=${1:-.dev/g}
T=$(dirname "$0")
O=${OUT:-/tmp/gemmrun}
mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$O/device.txt"
for f in "$B"/ptx/matmul-bf16-4096-*.ptx; do
	echo "== $(basename "$f")"
	ptxas -arch=sm_90a -v "$f" -o /tmp/k.cubin 2>&1 | grep -vE "Compiling entry|Function properties for"
	cuobjdump -sass /tmp/k.cubin | grep -oE "\b(HGMMA|HMMA|LDSM|LDGSTS|BAR|STG|LDL|STL|WARPSYNC|DEPBAR)[.A-Z0-9_x]*" | sort | uniq -c | sort -rn | head -12 | tr -s ' \n' ' '
	echo
done 2>&1 | tee "$O/sass.txt"
timeout 240 python3 "$T/gemmbench.py" "$B" check 2>&1 | tee "$O/check.txt" | grep -vE "^CHECK .* (bitwise|ulp) "
timeout 240 python3 "$T/gemmbench.py" "$B" bench 2>&1 | tee "$O/bench.txt" | grep -E "^(BITS|Traceback|.*Error)"
grep ^BENCH "$O/bench.txt" | sort -u
