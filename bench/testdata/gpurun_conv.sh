#!/bin/bash
# One device call for issue 26's PTX conv and FFT and their bench rows. Build here, carry
# .dev/conv, run from the repository root:
#
#   mkdir -p .dev/conv
#   CGO_ENABLED=0 go build -ldflags="-s -w" -o .dev/conv/tessera-qa ./cmd/tessera-qa
#   for s in golden determinism gradients property; do
#     CGO_ENABLED=0 go test -c -ldflags="-s -w" -o .dev/conv/$s.test ./suites/$s; done
#
# Order: the conv golden cases and gradients on cuda (correctness first), the conv cuda pins
# (written to $OUT/pins: check in cuda_sm_90.json, then delete the conv lines of
# golden/pins/cuda_sm_90.awaiting), the determinism specs of the convs against those pins,
# the random graphs on cuda (they draw convs and FFTs), then the bench rows. First run on the
# H200 on 2026-12-03 in the form of docs/gpu-runs.md's calls E and F.
B=.dev/conv
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
step() { echo "== $1 ($(( $(date +%s) - T0 ))s)"; }
step "golden conv cases on cuda"
timeout 120 $B/golden.test --ginkgo.label-filter='gpu && (conv1d || conv2d)' --ginkgo.succinct > $OUT/golden_conv.txt 2>&1; echo "rc $?"; tail -4 $OUT/golden_conv.txt
step "conv gradients on cuda"
timeout 180 $B/gradients.test --ginkgo.label-filter='gpu && (conv1d || conv2d)' --ginkgo.succinct > $OUT/gradients_conv.txt 2>&1; echo "rc $?"; tail -4 $OUT/gradients_conv.txt
step "cuda pins"
mkdir -p $OUT/pins && cp golden/pins/cuda_sm_90.json $OUT/pins/
timeout 300 $B/tessera-qa determinism pin --backend cuda --out $OUT/pins --db $OUT/pins/results.db > $OUT/pin.txt 2>&1; echo "rc $?"; tail -5 $OUT/pin.txt
step "determinism of the convs on cuda (runs, processes)"
timeout 180 $B/determinism.test --ginkgo.label-filter='gpu && (conv1d || conv2d)' --ginkgo.focus='same bits' --ginkgo.succinct > $OUT/determinism_conv.txt 2>&1; echo "rc $?"; tail -4 $OUT/determinism_conv.txt
step "random graphs on cuda"
timeout 240 $B/property.test --ginkgo.label-filter=gpu --ginkgo.succinct > $OUT/property.txt 2>&1; echo "rc $?"; tail -4 $OUT/property.txt
step "bench: copy, FFTs, conv2d"
timeout 240 $B/tessera-qa bench --vs torch --ops copy,fft_c2c,fft_r2c,conv2d --seed 1 --json $OUT/bench_spectral.json > $OUT/bench_spectral.txt 2>&1; echo "rc $?"; grep -v "^\[" $OUT/bench_spectral.txt
step "done"
