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
  name=$(basename "$pkg")
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
mkdir -p "$out/faults"
go test -c -tags failpoints -ldflags="-s -w" -o "$out/faults/golden.test" ./suites/golden
ls -la "$out"
# The device tool carries at most 64 MiB; the binaries compress about 3x.
tar -C .dev -czf .dev/gpu.tgz gpu
ls -la .dev/gpu.tgz
