package cuda

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// programCase is a small graph compiled by the real compiler and code generator, run on the
// GPU and compared with engine/ref. Shapes are ragged on purpose: no dimension is a multiple
// of a tile, so every boundary mask is exercised.
type programCase struct {
	name       string
	build      func(b *graph.Builder)
	rtol, atol float64
}

var (
	f32, bf16 = numerics.F32, numerics.BF16
)

var programCases = []programCase{
	{"add/f32/broadcast", func(b *graph.Builder) {
		b.Output(b.Op("add", nil, b.Input("x", f32, 37, 301), b.Input("y", f32, 301)))
	}, 0, 0},
	{"elementwise/fused-gelu", func(b *graph.Builder) {
		x := b.Input("x", f32, 5, 999)
		b.Output(b.Op("gelu", graph.Attrs{"approx": graph.String("tanh")}, b.Op("mul", nil, x, b.Op("sigmoid", nil, x))))
	}, 2e-6, 1e-6},
	{"softmax/f32", func(b *graph.Builder) {
		b.Output(b.Op("softmax", nil, b.Input("x", f32, 9, 1000)))
	}, 1e-5, 1e-7},
	{"layernorm/f32", func(b *graph.Builder) {
		b.Output(b.Op("layernorm", nil, b.Input("x", f32, 6, 270), b.Input("g", f32, 270), b.Input("be", f32, 270)))
	}, 1e-4, 1e-5},
	{"reduce_sum/f32", func(b *graph.Builder) {
		b.Output(b.Op("reduce_sum", graph.Attrs{"axes": graph.Ints(-1)}, b.Input("x", f32, 7, 4001)))
	}, 1e-5, 1e-4},
	{"matmul/f32/ragged", func(b *graph.Builder) {
		b.Output(b.Op("matmul", nil, b.Input("a", f32, 37, 70), b.Input("b", f32, 70, 45)))
	}, 1e-5, 1e-5},
	{"matmul/bf16", func(b *graph.Builder) {
		b.Output(b.Op("matmul", nil, b.Input("a", bf16, 130, 96), b.Input("b", bf16, 96, 72)))
	}, 1.6e-2, 1e-2},
	{"attention/bf16/causal", func(b *graph.Builder) {
		b.Output(b.Op("attention", graph.Attrs{"causal": graph.Bool(true)},
			b.Input("q", bf16, 2, 70, 64), b.Input("k", bf16, 2, 70, 64), b.Input("v", bf16, 2, 70, 64)))
	}, 3e-2, 1e-2},
	{"cast/f32->fp8e4m3", func(b *graph.Builder) {
		b.Output(b.Op("cast", graph.Attrs{"to": graph.DTypeAttr(numerics.F8E4M3)}, b.Input("x", f32, 1000)))
	}, 0, 0},
}

func compileCase(t *testing.T, c programCase) (*graph.Graph, *compiler.Program, map[string]*tensor.Tensor) {
	t.Helper()
	gb := graph.NewBuilder("g")
	c.build(gb)
	g, err := gb.Build()
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	rng := rand.New(rand.NewPCG(11, 13))
	feed := map[string]*tensor.Tensor{}
	for _, v := range g.Inputs {
		vals := make([]float64, v.Type.NumElems())
		for i := range vals {
			vals[i] = rng.Float64()*4 - 2
		}
		feed[v.Name] = tensor.FromFloat64(v.Type.DType, v.Type.Shape, vals)
	}
	return g, p, feed
}

// runOrSkip runs p, skipping the case when the code generator does not cover it yet.
func runOrSkip(t *testing.T, b *Backend, p *compiler.Program, feed map[string]*tensor.Tensor) []*tensor.Tensor {
	t.Helper()
	out, err := b.Run(p, feed)
	if errs.CodeOf(err) == errs.Unsupported && strings.Contains(err.Error(), "ptx:") {
		t.Skipf("code generator does not cover this program: %v", err)
	}
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return out
}

func TestGPUProgramsMatchRef(t *testing.T) {
	b := gpu(t)
	for _, c := range programCases {
		t.Run(c.name, func(t *testing.T) {
			g, p, feed := compileCase(t, c)
			before, err := b.Stats()
			if err != nil {
				t.Fatal(err)
			}
			got := runOrSkip(t, b, p, feed)
			mid, err := b.Stats()
			if err != nil {
				t.Fatal(err)
			}
			again := runOrSkip(t, b, p, feed)
			want, err := ref.Run(g, feed)
			if err != nil {
				t.Fatalf("ref: %v", err)
			}
			onCPU, err := (&cpu.Backend{}).Run(p, feed)
			if err != nil {
				t.Fatalf("cpu: %v", err)
			}
			for i := range want {
				name := g.Outputs[i].Name
				within(t, name, got[i], want[i], c.rtol, c.atol)
				if !bytes.Equal(got[i].Data, again[i].Data) {
					t.Errorf("%s: two runs differ bitwise (digests %s, %s)", name, got[i].Digest(), again[i].Digest())
				}
				t.Logf("%s: %d of %d elements bitwise equal to the cpu backend", name, sameElems(got[i], onCPU[i]), got[i].Len())
			}
			after, err := b.Stats()
			if err != nil {
				t.Fatal(err)
			}
			if after.ModuleLoads != mid.ModuleLoads {
				t.Errorf("the second run loaded %d modules again: the in-memory module cache missed", after.ModuleLoads-mid.ModuleLoads)
			}
			if after.Alloc.DriverAllocs != mid.Alloc.DriverAllocs {
				t.Errorf("the second run made %d cuMemAlloc calls: the caching allocator missed", after.Alloc.DriverAllocs-mid.Alloc.DriverAllocs)
			}
			if after.Alloc.LiveBlocks != before.Alloc.LiveBlocks {
				t.Errorf("device blocks leaked: %d live before, %d after", before.Alloc.LiveBlocks, after.Alloc.LiveBlocks)
			}
			if after.Alloc.Poisoned == before.Alloc.Poisoned {
				t.Error("poison mode was off: an unwritten output byte could have passed unnoticed")
			}
		})
	}
}

func TestGPURunRejectsBadInputsBeforeTheDevice(t *testing.T) {
	b := gpu(t)
	_, p, feed := compileCase(t, programCases[0])
	feed["x"] = tensor.New(f32, []int{37, 300})
	if _, err := b.Run(p, feed); errs.CodeOf(err) != errs.Shape {
		t.Errorf("wrong input shape: %v, want E_SHAPE", err)
	}
}

func TestGPUTimeAPI(t *testing.T) {
	b := gpu(t)
	_, p, feed := compileCase(t, programCases[2])
	times, err := b.Time(p, -1, feed, 7)
	if errs.CodeOf(err) == errs.Unsupported && strings.Contains(err.Error(), "ptx:") {
		t.Skipf("code generator does not cover this program: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(times) != 7 {
		t.Fatalf("%d times for 7 reps", len(times))
	}
	for i, ms := range times {
		if !(ms > 0 && ms < 1000) {
			t.Errorf("rep %d: %g ms", i, ms)
		}
	}
	if _, err := b.Time(p, len(p.Kernels), feed, 3); errs.CodeOf(err) != errs.Input {
		t.Errorf("timing a kernel that does not exist: %v, want E_INPUT", err)
	}
	t.Logf("softmax 9x1000: %v ms", times)
}

// within checks |got-want| <= atol + rtol*|want| elementwise, NaN matching NaN.
func within(t *testing.T, what string, got, want *tensor.Tensor, rtol, atol float64) {
	t.Helper()
	if got.TypeString() != want.TypeString() {
		t.Fatalf("%s: got %s, want %s", what, got.TypeString(), want.TypeString())
	}
	bad := 0
	for i := range want.Len() {
		g, w := got.Float64(i), want.Float64(i)
		if (math.IsNaN(g) && math.IsNaN(w)) || g == w || math.Abs(g-w) <= atol+rtol*math.Abs(w) {
			continue
		}
		if bad < 5 {
			t.Errorf("%s[%d] = %v, want %v", what, i, g, w)
		}
		bad++
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements out of tolerance (rtol %g, atol %g)", what, bad, want.Len(), rtol, atol)
	}
}

func sameElems(a, b *tensor.Tensor) int {
	n := 0
	for i := range a.Len() {
		if a.Bits(i) == b.Bits(i) {
			n++
		}
	}
	return n
}
