package ptx

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// benchCase is a large graph for timing on the GPU machine: testdata/gpucheck.py --bench fills
// its inputs with random normal values there (too big to carry), times the kernels with CUDA
// events and the same op in PyTorch.
type benchCase struct {
	Name    string         `json:"name"`
	Torch   string         `json:"torch"` // the PyTorch expression over inputs a, b, ...
	Flops   float64        `json:"flops"`
	Bytes   float64        `json:"bytes"`
	Buffers []bundleBuffer `json:"buffers"`
	Inputs  []int          `json:"inputs"`
	Shapes  [][]int        `json:"shapes"` // per input
	Kernels []bundleKernel `json:"kernels"`
}

// TestWriteBenchBundle writes the timing bundle to $TESSERA_PTX_BENCH (skips without it).
func TestWriteBenchBundle(t *testing.T) {
	dir := os.Getenv("TESSERA_PTX_BENCH")
	if dir == "" {
		t.Skip("TESSERA_PTX_BENCH not set: nothing to write")
	}
	if err := os.MkdirAll(filepath.Join(dir, "ptx"), 0o755); err != nil {
		t.Fatal(err)
	}
	simt := H100
	simt.SIMTOnly = true
	type spec struct {
		name, torch  string
		build        func(b *graph.Builder) *graph.Value
		flops, bytes float64
		target       Target
	}
	const n, r = 4096, 8192
	mm := func(b *graph.Builder) *graph.Value {
		return b.Op("matmul", nil, b.Input("a", numerics.BF16, n, n), b.Input("b", numerics.BF16, n, n))
	}
	specs := []spec{
		{"matmul-bf16-4096-mma.sync", "a @ b", mm, 2 * n * n * n, 3 * 2 * n * n, H100},
		{"matmul-bf16-4096-simt", "a @ b", mm, 2 * n * n * n, 3 * 2 * n * n, simt},
		{"softmax-f32-8192", "torch.softmax(a, -1)", func(b *graph.Builder) *graph.Value {
			return b.Op("softmax", nil, b.Input("a", numerics.F32, r, r))
		}, 0, 2 * 4 * r * r, H100},
	}
	var cases []benchCase
	for _, s := range specs {
		b := graph.NewBuilder("bench")
		b.Output(s.build(b))
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		p, err := compiler.Compile(g, compiler.Options{})
		if err != nil {
			t.Fatal(err)
		}
		c := benchCase{Name: s.name, Torch: s.torch, Flops: s.flops, Bytes: s.bytes, Inputs: p.Inputs}
		for _, v := range p.Graph.Inputs {
			c.Shapes = append(c.Shapes, v.Type.Shape)
		}
		for _, bf := range p.Buffers {
			c.Buffers = append(c.Buffers, bundleBuffer{Bytes: bf.Type.NumElems() * bf.Type.DType.Size(), DType: bf.Type.DType.String()})
		}
		c.Kernels = writeBundleKernels(t, dir, s.name, p, s.target)
		cases = append(cases, c)
	}
	js, err := json.MarshalIndent(cases, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bench.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
}
