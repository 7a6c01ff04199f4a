#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after ci/gpu/build.sh on a dev machine:
# the GPU-labelled specs of every suite (Ginkgo JSON reports under $OUT or ./gpu-out), the CUDA
# backend's GPU tests, and `tessera-qa devices`. Prints a tally line last. The sanitizer suite
# is not among them: it needs a whole device command of its own (ci/gpu/sanitizer.sh).
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=.dev/gpu
# build.sh leaves a tarball (what travels to the GPU machine); unpack it once (xz, or Python's
# lzma where the machine has no xz).
if [ ! -d "$bin" ] && [ -f .dev/gpu.txz ]; then
  xz -dc .dev/gpu.txz 2>/dev/null | tar -C .dev -xf - ||
    python3 -c 'import tarfile; tarfile.open(".dev/gpu.txz").extractall(".dev")'
fi
# The suites that run the CLI (stress, collectives ...) take this binary: there is no Go here to
# build one. The oracle specs take the first python3 that has torch (the image's is not
# /usr/bin/python3).
export TESSERA_QA_BIN="${TESSERA_QA_BIN:-$PWD/$bin/tessera-qa}"
if [ -z "${TESSERA_QA_PYTHON:-}" ] && p=$(command -v python3) && "$p" -c "import torch" 2>/dev/null; then
  export TESSERA_QA_PYTHON="$p"
fi
out=${OUT:-gpu-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
fail=0
# TESSERA_GPU_ONLY="golden determinism dist-cudaipc collectives-cli ..." runs only the parts named
# (a suite or package by its binary's name, dist-<name>, collectives-cli): a device command is
# bounded to 10 minutes, so the whole list is split over several.
want() { [ -z "${TESSERA_GPU_ONLY:-}" ] || [[ " $TESSERA_GPU_ONLY " == *" $1 "* ]]; }
"$bin/tessera-qa" devices | tee "$out/devices.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$out/devices.txt"
for t in "$bin"/*.test; do
  name=$(basename "$t" .test)
  want "$name" || continue
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
  tail -3 "$out/$name.log" | sed "s/^/$name: /"
done
# The device transports (engine/dist/devreduce: the shared reduction kernel against the host's
# bits; engine/dist/cudaipc: 2 and 4 ranks as processes on the one GPU
# through CUDA IPC, and the all_reduce benchmark; engine/dist/nccl: world size 1, and whether
# NCCL takes two ranks on one GPU). Each writes its case lines and benchmark rows to
# $out/<name>/ (TESSERA_GPU_ARTIFACTS); TESSERA_GPU_BENCH=0 skips the benchmark.
for t in "$bin"/dist/*.test; do
  [ -f "$t" ] || continue
  name=dist-$(basename "$t" .test)
  want "$name" || continue
  (cd "$out" && TESSERA_GPU_ARTIFACTS="$out/$name" "$OLDPWD/$t" -test.run GPU -test.v -test.timeout 40m > "$name.log" 2>&1) || { echo "FAIL $name"; fail=1; }
  grep -E "^(--- |ok|FAIL|PASS)" "$out/$name.log" | tail -20
done
# tessera-qa collectives over the device transports (issue 9): the cuda transport with 2 and 4
# ranks as processes on the one GPU and NCCL with world size 1, each checked against the float64
# answer and, with --compare-host, against the inproc host transport's bits in the same command
# (inproc and tcp give the same bits by contract). Two runs each: the correctness matrix (every
# op, reduction and dtype, odd counts, sizes to 256 KiB) and an all_reduce f32 busbw sweep (1 to
# 64 MiB) beside the device copy bandwidth measured in the same run. JSON reports and tables in
# $out/collectives-<transport>-np<N>-{matrix,busbw}.{json,log}.
coll_matrix=(--ops all --redops all --dtypes all --counts 0,1,7,1021 -b 64 -e 256K -f 16 --iters 5 --warmup 2)
coll_busbw=(--ops all_reduce --redops sum --dtypes f32 --counts none -b 1M -e 64M -f 4 --iters 20 --warmup 5)
want collectives-cli || exit $fail
for run in "cuda 2" "cuda 4" "nccl 1"; do
  read -r tr np <<< "$run"
  for kind in matrix busbw; do
    name=collectives-$tr-np$np-$kind
    args=("coll_$kind[@]")
    extra=()
    if [ "$tr" = nccl ] && [ "$kind" = busbw ]; then extra=(--mode deterministic,fast); fi
    "$bin/tessera-qa" collectives --transport "$tr" --np "$np" --compare-host "${!args}" "${extra[@]}" \
      --json "$out/$name.json" > "$out/$name.log" 2>&1 || { echo "FAIL $name"; fail=1; }
    grep -E "^(# check|# device|# Out of bounds|# Avg bus|PASS|FAIL|tessera-qa: E_)" "$out/$name.log" | tail -6
  done
done
exit $fail
