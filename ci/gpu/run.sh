#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/build.sh on a dev machine:
# the GPU-labelled specs of every suite (Ginkgo JSON reports under $OUT or ./gpu-out), the CUDA
# backend's GPU tests, and `tessera-qa devices`. Prints a tally line last.
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=.dev/gpu
# build.sh leaves a tarball (what travels to the GPU machine); unpack it once.
if [ ! -d "$bin" ] && [ -f .dev/gpu.tgz ]; then tar -C .dev -xzf .dev/gpu.tgz; fi
out=${OUT:-gpu-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
fail=0
"$bin/tessera-qa" devices | tee "$out/devices.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$out/devices.txt"
for t in "$bin"/*.test; do
  name=$(basename "$t" .test)
  if [ "$name" = cuda ]; then
    (cd "$out" && "$OLDPWD/$t" -test.run GPU -test.v > "cuda.log" 2>&1) || { echo "FAIL $name"; fail=1; }
    grep -E "^(--- |ok|FAIL|PASS)" "$out/cuda.log" | tail -20
    continue
  fi
  # Each suite runs in its own folder, as `go test` would, with only the GPU specs.
  # TESSERA_GPU_PROPERTY_ARGS passes flags to the property suite alone (-rapid.checks=N bounds
  # its time: every random graph JITs its own kernels, about 4 minutes at rapid's default 100).
  extra=()
  if [ "$name" = property ] && [ -n "${TESSERA_GPU_PROPERTY_ARGS:-}" ]; then read -ra extra <<< "$TESSERA_GPU_PROPERTY_ARGS"; fi
  (cd "$(dirname "$t")" && "./$(basename "$t")" -ginkgo.label-filter=gpu -ginkgo.no-color -ginkgo.succinct \
     -ginkgo.json-report="$out/$name.json" "${extra[@]}") > "$out/$name.log" 2>&1 || { echo "FAIL $name"; fail=1; }
  tail -3 "$out/$name.log"
done
# The device transports (engine/dist/devreduce: the shared reduction kernel against the host's
# bits; engine/dist/cudaipc: 2 and 4 ranks as processes on the one GPU
# through CUDA IPC, and the all_reduce benchmark; engine/dist/nccl: world size 1, and whether
# NCCL takes two ranks on one GPU). Each writes its case lines and benchmark rows to
# $out/<name>/ (TESSERA_GPU_ARTIFACTS); TESSERA_GPU_BENCH=0 skips the benchmark.
for t in "$bin"/dist/*.test; do
  [ -f "$t" ] || continue
  name=dist-$(basename "$t" .test)
  (cd "$out" && TESSERA_GPU_ARTIFACTS="$out/$name" "$OLDPWD/$t" -test.run GPU -test.v -test.timeout 40m > "$name.log" 2>&1) || { echo "FAIL $name"; fail=1; }
  grep -E "^(--- |ok|FAIL|PASS)" "$out/$name.log" | tail -20
done
exit $fail
