// Package partitions_test is issue 12 item 4: isolation checks between partitions of one GPU.
// MIG is disabled on the GPU machines (design.md §10), so the partitions are SM groups made with
// CUDA green contexts (mig/green): 2 x 64 of the H100's 132 SMs. The specs check
//
//   - results: a job on partition A gives the same bits whatever partition B runs;
//   - faults: an illegal address in B's process kills only B's process;
//   - memory: a buffer of A's process is not readable from B's process;
//   - performance: A's throughput next to a noisy neighbour on B, as a ratio to alone (reported);
//   - reproducibility (item 5): the engine's golden catalogue gives the same bits on 1/4, 1/2
//     and the whole GPU (TESSERA_CUDA_SMS places a process on a partition), and on a partition
//     while another process loads the GPU; a planted SM-count-dependent tiling is caught.
//
// Green contexts isolate SMs only. Memory bandwidth, L2, device memory capacity and the copy
// engines are shared, and the report says so. Fault and memory isolation between processes comes
// from their separate CUDA contexts. The MIG-only spec skips with "MIG disabled on <GPU>".
//
// Every spec is labelled gpu and skips with the reason where there is no driver or device.
// Process specs re-run this test binary with TESSERA_GREEN_CHILD set (child.go).
//
// Build here, run on the GPU machine (the interference ratios print with -ginkgo.v):
//
//	CGO_ENABLED=0 go test -c -o .dev/partitions.test ./suites/partitions
//	./partitions.test -ginkgo.v -ginkgo.label-filter=gpu -test.timeout=15m
package partitions_test

import (
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
	"github.com/tessera-qa/tessera-qa/golden"
)

func TestPartitions(t *testing.T) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(runChild(role))
	}
	// A digest child runs the golden catalogue on the CUDA backend, placed by TESSERA_CUDA_SMS.
	if os.Getenv(golden.DigestChildEnv) == "1" {
		b, err := backend.Get("cuda")
		if err != nil {
			t.Fatal(err)
		}
		if err := golden.PrintDigests(os.Stdout, golden.ComputeDigests(golden.Catalogue(), []backend.Backend{b})); err != nil {
			t.Fatal(err)
		}
		return
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "Partitions Suite")
}
