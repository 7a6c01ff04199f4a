#!/usr/bin/env bash
# Builds, on a development machine (no GPU, no CUDA toolkit needed), everything the GPU machine
# runs: the CLI and one test binary per package or suite with GPU specs, into .dev/gpu/.
# The GPU machine has no Go (design.md §5): carry .dev/gpu there and run ci/gpu/run.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.dev/gpu
rm -rf "$out" && mkdir -p "$out"
export CGO_ENABLED=0
go build -ldflags="-s -w" -o "$out/tessera-qa" ./cmd/tessera-qa
for pkg in ./suites/* ./engine/backend/cuda; do
  [ -d "$pkg" ] || continue
  # suites/internal holds helpers for the suites, no specs of its own.
  compgen -G "$pkg/*_test.go" >/dev/null || continue
  name=$(basename "$pkg")
  # The sanitizer suite is built once, with the failpoints (below): run.sh leaves it to
  # ci/gpu/sanitizer.sh, whose time it needs whole.
  [ "$name" = sanitizer ] && continue
  go test -c -ldflags="-s -w" -o "$out/$name.test" "$pkg"
done
# The device transports' GPU tests (engine/dist/devreduce, cudaipc, nccl): plain go test
# binaries, in their own folder because run.sh runs them without Ginkgo's flags.
mkdir -p "$out/dist"
for pkg in ./engine/dist/devreduce ./engine/dist/cudaipc ./engine/dist/nccl; do
  go test -c -ldflags="-s -w" -o "$out/dist/$(basename "$pkg").test" "$pkg"
done
# The golden suite again, built with the GPU code generator's planted faults compiled in
# (engine/failpoint; inert unless TESSERA_FAILPOINTS names one): ci/gpu/faults.sh uses it.
# The partitions suite and stress's unit tests likewise, for the CUDA backend's planted faults:
# a reduction tiling taken from the SM count, and device buffers kept per run (issue 12).
mkdir -p "$out/faults"
go test -c -tags failpoints -ldflags="-s -w" -o "$out/faults/golden.test" ./suites/golden
go test -c -tags failpoints -ldflags="-s -w" -o "$out/faults/partitions.test" ./suites/partitions
go test -c -tags failpoints -ldflags="-s -w" -o "$out/faults/stress.test" ./stress
# suites/sanitizer: the four compute-sanitizer tools over our kernels, and the two planted faults
# only a tool sees (a store one past the output, the fast reduction's barrier dropped). A
# failpoints build is inert with TESSERA_FAILPOINTS unset, so one binary serves both
# (ci/gpu/sanitizer.sh, ci/gpu/faults.sh).
mkdir -p "$out/sanitizer"
go test -c -tags failpoints -ldflags="-s -w" -o "$out/sanitizer/sanitizer.test" ./suites/sanitizer
ls -la "$out"
# The device tool carries at most 64 MiB: gzip left 125 MB for the 24 binaries, xz -9 about 50 MB.
rm -f .dev/gpu.tgz
tar -C .dev -cf - gpu | xz -9 -T2 > .dev/gpu.txz  # -9: a 64 MiB dictionary spans binaries that share the engine
ls -la .dev/gpu.txz
