package ptx

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// The gemm bundle carries the dedicated matmul kernels to the GPU machine for
// testdata/gemmbench.py: bench.json times every tiling at 4096^3 and 8192^3 against
// torch.matmul (and checks each against it), manifest.json holds ragged shapes with the CPU
// backend's outputs, run once through the general tensor-core path and once through every
// dedicated tiling, so the script can also compare their bits.

type gemmBenchCase struct {
	benchCase
	Group string `json:"group"` // cases of one group get the same inputs
	Tile  string `json:"tile"`
}

type gemmCheckCase struct {
	bundleCase
	Group string `json:"group"`
	Tile  string `json:"tile"`
}

// writeKernel writes one module's PTX and returns its bundle entry.
func writeKernel(t *testing.T, dir, file string, m *Module, params []int) bundleKernel {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "ptx", file), []byte(m.PTX), 0o644); err != nil {
		t.Fatal(err)
	}
	return bundleKernel{PTX: "ptx/" + file, Entry: m.Entry, Grid: m.Grid, Threads: m.Threads, Shared: m.SharedBytes, Params: params}
}

// gemmModules returns the general path's module (label "general") and one per tiling.
func gemmModules(t *testing.T, p *compiler.Program) (labels []string, mods []*Module) {
	t.Helper()
	k := p.Kernels[0]
	s, ok := matchGemm(k)
	if !ok {
		t.Fatalf("%s: not a dedicated-kernel matmul", k.Name)
	}
	t.Setenv("TESSERA_PTX_GEMM", "off")
	gen, err := Generate(k, H100)
	if err != nil {
		t.Fatal(err)
	}
	os.Unsetenv("TESSERA_PTX_GEMM")
	labels, mods = append(labels, "general"), append(mods, gen)
	for _, c := range gemmVariants() {
		labels = append(labels, fmt.Sprintf("%s-%dx%d-s%d-w%d", c.path, c.bm, c.bn, c.stages, c.wait))
		mods = append(mods, gemmKernel(s, c, sm90a, entryName(k.Name), len(k.Params)))
	}
	return labels, mods
}

func compileMatmul(t *testing.T, dt numerics.DType, s mmShape) *compiler.Program {
	t.Helper()
	b := graph.NewBuilder("mm")
	sa, sb, op := []int{s.m, s.k}, []int{s.k, s.n}, "matmul"
	if s.batch > 0 {
		sa, sb, op = append([]int{s.batch}, sa...), append([]int{s.batch}, sb...), "batch_matmul"
	}
	b.Output(b.Op(op, nil, b.Input("a", dt, sa...), b.Input("b", dt, sb...)))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func paramBuffers(p *compiler.Program) []int {
	var out []int
	for _, prm := range p.Kernels[0].Params {
		out = append(out, prm.Buffer)
	}
	return out
}

func buffersOf(p *compiler.Program) []bundleBuffer {
	var out []bundleBuffer
	for _, bf := range p.Buffers {
		out = append(out, bundleBuffer{Bytes: bf.Type.NumElems() * bf.Type.DType.Size(), DType: bf.Type.DType.String()})
	}
	return out
}

// TestWriteGemmBundle writes the bundle to $TESSERA_PTX_GEMM_BUNDLE (skips without it).
func TestWriteGemmBundle(t *testing.T) {
	dir := os.Getenv("TESSERA_PTX_GEMM_BUNDLE")
	if dir == "" {
		t.Skip("TESSERA_PTX_GEMM_BUNDLE not set: nothing to write")
	}
	for _, sub := range []string{"ptx", "data"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var bench []gemmBenchCase
	for _, n := range []int{4096, 8192} {
		p := compileMatmul(t, numerics.BF16, mmShape{0, n, n, n, false, false})
		labels, mods := gemmModules(t, p)
		for i, m := range mods {
			if labels[i] == "general" && n > 4096 {
				continue // 8.6 ms at 4096 already; 8x that tells nothing new
			}
			name := fmt.Sprintf("matmul-bf16-%d-%s", n, labels[i])
			c := gemmBenchCase{Group: fmt.Sprint(n), Tile: m.Tile, benchCase: benchCase{Name: name, Torch: "a @ b",
				Flops: 2 * float64(n) * float64(n) * float64(n), Bytes: 3 * 2 * float64(n) * float64(n), Inputs: p.Inputs,
				Buffers: buffersOf(p), Kernels: []bundleKernel{writeKernel(t, dir, name+".ptx", m, paramBuffers(p))}}}
			for _, v := range p.Graph.Inputs {
				c.Shapes = append(c.Shapes, v.Type.Shape)
			}
			bench = append(bench, c)
		}
	}
	writeJSON(t, filepath.Join(dir, "bench.json"), bench)

	var check []gemmCheckCase
	be := &cpu.Backend{}
	shapes := []mmShape{{2, 200, 264, 136, false, false}, {0, 8, 8, 8, false, false}, {0, 130, 72, 264, false, false}, {3, 256, 512, 384, false, false}}
	for _, dt := range []numerics.DType{numerics.BF16, numerics.F16} {
		for si, sh := range shapes {
			p := compileMatmul(t, dt, sh)
			labels, mods := gemmModules(t, p)
			base := fmt.Sprintf("%s-%dx%dx%dx%d", dt, max(sh.batch, 1), sh.m, sh.k, sh.n)
			rng := rand.New(rand.NewPCG(uint64(si), 5))
			for vi, variant := range []string{"normal", "randombits"} {
				in := map[string]*tensor.Tensor{}
				var inBytes []byte
				for _, v := range p.Graph.Inputs {
					tt := &tensor.Tensor{DType: dt, Shape: v.Type.Shape, Data: make([]byte, v.Type.NumElems()*2)}
					for j := 0; j < v.Type.NumElems(); j++ {
						bits := uint64(rng.Uint32())
						if vi == 0 {
							bits = numerics.Encode(dt, rng.NormFloat64())
						}
						tt.Data[2*j], tt.Data[2*j+1] = byte(bits), byte(bits>>8)
					}
					in[v.Name] = tt
					inBytes = append(inBytes, tt.Data...)
				}
				outs, err := be.Run(p, in)
				if err != nil {
					t.Fatal(err)
				}
				stem := "data/" + base + "@" + variant
				if err := os.WriteFile(filepath.Join(dir, stem+".in"), inBytes, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, stem+".out"), outs[0].Data, 0o644); err != nil {
					t.Fatal(err)
				}
				for i, m := range mods {
					file := base + "-" + labels[i] + ".ptx"
					c := gemmCheckCase{Group: base + "@" + variant, Tile: m.Tile, bundleCase: bundleCase{
						Name: base + "@" + variant + "-" + labels[i], Data: stem, Buffers: buffersOf(p), Inputs: p.Inputs,
						Outputs: p.Outputs, Kernels: []bundleKernel{writeKernel(t, dir, file, m, paramBuffers(p))}}}
					check = append(check, c)
				}
			}
		}
	}
	writeJSON(t, filepath.Join(dir, "manifest.json"), check)
	t.Logf("wrote %d bench and %d check cases to %s", len(bench), len(check), dir)
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	js, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, js, 0o644); err != nil {
		t.Fatal(err)
	}
}
