package bench

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend/backendtest"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// TestGPUStreamKernelsMatchCPU runs the stream, reduction and transpose lowerings on the CUDA
// backend at sizes the emulator cannot reach (millions of elements, ragged edges, several
// grid-stride iterations, hundreds of CTAs) and requires the CPU backend's bytes, twice: the
// lowerings use the SIMT path's element routines and the Tile IR's reduction order, so f32
// and narrower outputs are bit-identical. Without a GPU it skips.
func TestGPUStreamKernelsMatchCPU(t *testing.T) {
	gpu := gpuBackend(t)
	cpu := backendtest.CPU(t)
	f32, bf16, f8, i8 := numerics.F32, numerics.BF16, numerics.F8E4M3, numerics.I8
	type tc struct {
		name, path string
		build      func(b *graph.Builder) *graph.Value
	}
	in := func(b *graph.Builder, name string, dt numerics.DType, shape ...int) *graph.Value {
		return b.Input(name, dt, shape...)
	}
	cast := func(dt, to numerics.DType) func(b *graph.Builder) *graph.Value {
		return func(b *graph.Builder) *graph.Value {
			return b.Op("cast", graph.Attrs{"to": graph.DTypeAttr(to)}, in(b, "x", dt, 2048, 1031))
		}
	}
	red := func(op string, dt numerics.DType, axis int64, shape ...int) func(b *graph.Builder) *graph.Value {
		return func(b *graph.Builder) *graph.Value {
			return b.Op(op, graph.Attrs{"axes": graph.Ints(axis)}, in(b, "x", dt, shape...))
		}
	}
	cases := []tc{
		{"copy/f32", "simt-stream", func(b *graph.Builder) *graph.Value {
			return b.Op("reshape", graph.Attrs{"shape": graph.Ints(-1)}, in(b, "x", f32, 4097, 1025))
		}},
		{"copy/bf16", "simt-stream", func(b *graph.Builder) *graph.Value {
			return b.Op("reshape", graph.Attrs{"shape": graph.Ints(-1)}, in(b, "x", bf16, 4097, 1025))
		}},
		{"cast/f32-bf16", "simt-stream", cast(f32, bf16)},
		{"cast/bf16-f32", "simt-stream", cast(bf16, f32)},
		{"cast/f32-fp8e4m3", "simt-stream", cast(f32, f8)},
		{"cast/int8-f32", "simt-stream", cast(i8, f32)},
		{"elementwise/f32", "simt-stream", elementwiseChain(f32)},
		{"elementwise/bf16", "simt-stream", elementwiseChain(bf16)},
		{"bias-add/bf16", "simt-stream", func(b *graph.Builder) *graph.Value {
			return b.Op("add", nil, in(b, "x", bf16, 2048, 1024), in(b, "bias", bf16, 1024))
		}},
		{"slice/f32", "simt-stream", func(b *graph.Builder) *graph.Value {
			return b.Op("slice", graph.Attrs{"starts": graph.Ints(3, 17), "ends": graph.Ints(2000, 1001)}, in(b, "x", f32, 2048, 1024))
		}},
		{"concat/bf16", "simt-stream", func(b *graph.Builder) *graph.Value {
			return b.Op("concat", graph.Attrs{"axis": graph.Int(1)}, in(b, "x", bf16, 1024, 512), in(b, "y", bf16, 1024, 256))
		}},
		{"reduce_sum/rows/f32", "simt-reduce", red("reduce_sum", f32, 1, 2048, 3000)},
		{"reduce_sum/cols/f32", "simt-reduce", red("reduce_sum", f32, 0, 3000, 2048)},
		{"reduce_max/rows/f32", "simt-reduce", red("reduce_max", f32, 1, 2048, 3000)},
		// lane pairs share a tile; the last tile's 67 16-byte blocks leave its last pair half empty
		{"reduce_sum/rows-odd-blocks/f32", "simt-reduce", red("reduce_sum", f32, 1, 1000, 1036)},
		{"reduce_max/cols/f32", "simt-reduce", red("reduce_max", f32, 0, 3000, 2048)},
		{"reduce_mean/rows/bf16", "simt-reduce", red("reduce_mean", bf16, 1, 1000, 70000)},
		{"reduce_sum/all/f32", "simt-reduce", func(b *graph.Builder) *graph.Value {
			return b.Op("reduce_sum", nil, in(b, "x", f32, 1024, 1024))
		}},
		{"transpose/bf16", "simt-transpose", func(b *graph.Builder) *graph.Value {
			return b.Op("transpose", graph.Attrs{"perm": graph.Ints(1, 0)}, in(b, "x", bf16, 2048, 1536))
		}},
		{"transpose/batched/f32", "simt-transpose", func(b *graph.Builder) *graph.Value {
			return b.Op("transpose", graph.Attrs{"perm": graph.Ints(0, 2, 1)}, in(b, "x", f32, 4, 512, 384))
		}},
	}
	rng := rand.New(rand.NewPCG(14, 1))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := graph.NewBuilder("stream")
			b.Output(c.build(b))
			g, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			p, err := compiler.Compile(g, compiler.Options{})
			if err != nil {
				t.Fatal(err)
			}
			target := ptx.H100
			target.ArchSuffix = "a"
			if path := programPath(p, target); path != c.path {
				t.Errorf("path %s, want %s", path, c.path)
			}
			inputs := map[string]*tensor.Tensor{}
			for _, v := range g.Inputs {
				x := tensor.New(v.Type.DType, v.Type.Shape)
				for i := range x.Len() {
					switch {
					case rng.IntN(997) == 0: // a few NaNs and infinities in every tensor
						x.SetFloat64(i, []float64{nanF, infF, -infF}[rng.IntN(3)])
					case v.Type.DType.IsInt():
						x.SetFloat64(i, float64(rng.IntN(256)-128))
					default:
						x.SetFloat64(i, rng.NormFloat64()*3)
					}
				}
				inputs[v.Name] = x
			}
			want, err := cpu.Run(p, inputs)
			if err != nil {
				t.Fatal(err)
			}
			for run := range 2 {
				got, err := gpu.Run(p, inputs)
				if err != nil {
					t.Fatal(err)
				}
				if bytes.Equal(got[0].Data, want[0].Data) {
					continue
				}
				// gelu's tanh runs in f64 on both sides by different routines (math.Tanh on the
				// CPU), about an f64 ulp apart: once in a long while that flips an f32 rounding.
				if !strings.HasPrefix(c.name, "elementwise/") || !rareULPs(got[0], want[0]) {
					t.Fatalf("run %d: %s", run, firstDiff(got[0], want[0]))
				}
			}
		})
	}
}

// elementwiseChain is the bench's elementwise row, gelu_tanh(x*y + z), on a ragged shape.
func elementwiseChain(dt numerics.DType) func(b *graph.Builder) *graph.Value {
	return func(b *graph.Builder) *graph.Value {
		x, y, z := b.Input("x", dt, 1024, 1000), b.Input("y", dt, 1024, 1000), b.Input("z", dt, 1024, 1000)
		return b.Op("gelu", graph.Attrs{"approx": graph.String("tanh")}, b.Op("add", nil, b.Op("mul", nil, x, y), z))
	}
}

// rareULPs: every differing element is one ulp off, and at most one in 100000 differs.
func rareULPs(got, want *tensor.Tensor) bool {
	n := 0
	for i := range got.Len() {
		g, w := got.Bits(i), want.Bits(i)
		if g == w {
			continue
		}
		if n++; g != w+1 && w != g+1 {
			return false
		}
	}
	return n <= got.Len()/100000+1
}

func firstDiff(got, want *tensor.Tensor) string {
	for i := range got.Len() {
		if got.Bits(i) != want.Bits(i) {
			return fmt.Sprintf("element %d of %d: gpu %#x, cpu %#x", i, got.Len(), got.Bits(i), want.Bits(i))
		}
	}
	return "shapes differ"
}

var nanF, infF = math.NaN(), math.Inf(1)
