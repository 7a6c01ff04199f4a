package bench

import (
	"slices"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend/backendtest"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/harness"
)

// TestGPURowKernelsMatchGolden runs every golden case of softmax, log_softmax, layernorm and
// rmsnorm on the CUDA backend (f32/f16/bf16 on the fast row kernels, the rest on the SIMT
// path) against its golden file, twice, and requires the same bits both times. It logs, per
// case, the path, the largest ulp distance to the golden output and whether the bits equal
// the CPU backend's (the fast kernels sum in another order: a few ulp, not bit-identical).
// Without a GPU it skips.
func TestGPURowKernelsMatchGolden(t *testing.T) {
	gpu := gpuBackend(t)
	cpu := backendtest.CPU(t)
	files, err := golden.LoadAll(golden.Data())
	if err != nil {
		t.Fatal(err)
	}
	n, fast, same := 0, 0, 0
	for _, f := range files {
		if !slices.Contains([]string{"softmax", "log_softmax", "layernorm", "rmsnorm"}, f.Op) {
			continue
		}
		for _, c := range f.Cases {
			n++
			p, err := compiler.Compile(c.Graph, compiler.Options{})
			if err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			target := ptx.H100
			target.ArchSuffix = "a"
			path := programPath(p, target)
			if path == "simt-rows" {
				fast++
			}
			r1, r2 := golden.CheckSpec(c, gpu), golden.CheckSpec(c, gpu)
			if r1.Verdict != harness.VerdictPass {
				t.Errorf("%s (%s): %s: %s", c.Name, path, r1.Verdict, r1.Reason)
				continue
			}
			if r1.Digest == "" || r1.Digest != r2.Digest {
				t.Errorf("%s (%s): digests differ between two runs: %s vs %s", c.Name, path, r1.Digest, r2.Digest)
			}
			rc := golden.CheckSpec(c, cpu)
			if rc.Digest == r1.Digest {
				same++
			}
			var ulp uint64
			for _, o := range r1.Outputs {
				ulp = max(ulp, o.Check.MaxULP)
			}
			t.Logf("%-28s %-9s max %d ulp from golden, bit-identical to cpu: %v", c.Name, path, ulp, rc.Digest == r1.Digest)
		}
	}
	t.Logf("%d row cases on the GPU, %d on the fast row kernels, %d bit-identical to the cpu backend", n, fast, same)
	if fast < 36 {
		t.Errorf("only %d cases took the fast row kernels", fast)
	}
}
