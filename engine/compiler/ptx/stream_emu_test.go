package ptx

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// streamTarget launches few CTAs (one SM), so that on test sizes the grid-stride loop runs
// several iterations and the unrolled chunks past the end are predicated off.
var streamTarget = Target{SM: 90, PTXVersion: "8.0", SMs: 1}

// fillStream gives a tensor random values with the dtype's special patterns mixed in (NaN
// payloads, -0, ±Inf, fp8 e5m2 Inf, integer extremes), so moves must keep bits and arithmetic
// must meet the specials.
func fillStream(tt *tensor.Tensor, rng *rand.Rand, specialsEvery int) {
	pats := specialPatterns[tt.DType]
	for i := range tt.Len() {
		switch {
		case specialsEvery > 0 && rng.IntN(specialsEvery) == 0:
			tt.SetBits(i, pats[rng.IntN(len(pats))])
		case tt.DType.IsInt():
			tt.SetFloat64(i, float64(rng.IntN(300)-150))
		case tt.DType == numerics.Bool:
			tt.SetBits(i, uint64(rng.IntN(2)))
		default:
			tt.SetFloat64(i, rng.NormFloat64()*4)
		}
	}
}

// checkStream compiles g (one kernel), runs the CPU backend and the stream module in the
// emulator, and wants the same bytes: the stream lowering uses the SIMT path's element
// routines, which give the CPU backend's bits, and moves copy bits.
func checkStream(t *testing.T, g *graph.Graph, target Target, seed uint64) *Module {
	t.Helper()
	return checkFastPath(t, g, target, seed, "simt-stream", 8)
}

// checkFastPath is checkStream for a kernel that must take the given fast path.
// One element in specialsEvery is a special pattern (0: none, so that a reduction's result is
// not NaN or Inf whatever the order).
func checkFastPath(t *testing.T, g *graph.Graph, target Target, seed uint64, path string, specialsEvery int) *Module {
	t.Helper()
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Kernels) != 1 {
		t.Fatalf("%d kernels", len(p.Kernels))
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	in := map[string]*tensor.Tensor{}
	for _, v := range g.Inputs {
		in[v.Name] = tensor.New(v.Type.DType, v.Type.Shape)
		fillStream(in[v.Name], rng, specialsEvery)
	}
	cpu, _ := backend.Get("cpu")
	want, err := cpu.Run(p, in)
	if err != nil {
		t.Fatal(err)
	}
	got, mod := emulateWith(t, p, in, target)
	if mod.Path != path {
		t.Fatalf("kernel took path %s, want %s", mod.Path, path)
	}
	t.Setenv(streamEnv, "off")
	simt, ref := emulateWith(t, p, in, target)
	if ref.Path != "simt" {
		t.Fatalf("with %s=off the kernel took path %s", streamEnv, ref.Path)
	}
	if !bytes.Equal(got.Data, simt.Data) {
		for i := range got.Len() {
			if got.Bits(i) != simt.Bits(i) {
				t.Fatalf("element %d of %d: got %#x, the SIMT path %#x", i, got.Len(), got.Bits(i), simt.Bits(i))
			}
		}
	}
	// The CPU backend: the same bits, except that an f64 result of the math library may be
	// an ulp off math.Exp and friends, and an f64 NaN's payload is not specified.
	for i := range got.Len() {
		g, w := got.Bits(i), want[0].Bits(i)
		if g == w {
			continue
		}
		if got.DType == numerics.F64 {
			gf, wf := got.Float64(i), want[0].Float64(i)
			if gf != gf && wf != wf {
				continue
			}
			if d := int64(g) - int64(w); gf == gf && wf == wf && d >= -2 && d <= 2 {
				continue
			}
		}
		t.Fatalf("element %d of %d: got %#x, want %#x (cpu backend)", i, got.Len(), g, w)
	}
	return mod
}

func build(t *testing.T, fn func(b *graph.Builder) *graph.Value) (*graph.Graph, bool) {
	b := graph.NewBuilder("stream")
	b.Output(fn(b))
	g, err := b.Build()
	return g, err == nil
}

// Sizes with ragged edges: not a multiple of any vector width, a row length that is odd, and
// one large enough that the grid-stride loop wraps with streamTarget.
var streamShapes = [][]int{{3, 37}, {1, 7}, {5, 64}, {4, 8231}}

func TestStreamElementwiseEmulated(t *testing.T) {
	unary := []string{"neg", "abs", "relu", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "silu", "sign", "erf", "gelu"}
	binary := []string{"add", "sub", "mul", "div", "maximum", "minimum"}
	n := 0
	for _, dt := range numerics.All {
		for si, shape := range streamShapes {
			if si == 3 && dt != numerics.F32 && dt != numerics.BF16 && dt != numerics.I8 {
				continue // the wrap-around size: one dtype per element size class is enough
			}
			var cases []string
			cases = append(cases, binary...)
			if si < 2 {
				cases = append(cases, unary...)
			} else {
				cases = append(cases, "exp", "relu")
			}
			for _, op := range cases {
				g, ok := build(t, func(b *graph.Builder) *graph.Value {
					x := b.Input("x", dt, shape...)
					for _, u := range unary {
						if u == op {
							return b.Op(op, nil, x)
						}
					}
					return b.Op(op, nil, x, b.Input("y", dt, shape...))
				})
				if !ok {
					continue // op not defined on dt
				}
				t.Run(fmt.Sprintf("%s/%s/%v", op, dt, shape), func(t *testing.T) { checkStream(t, g, streamTarget, uint64(n)) })
				n++
			}
		}
	}
	if n < 150 {
		t.Errorf("only %d cases ran", n)
	}
}

// TestStreamCastsEmulated: every dtype to every dtype, so every load decode and store encode
// runs on both the vector and the scalar (tail) path.
func TestStreamCastsEmulated(t *testing.T) {
	for _, from := range numerics.All {
		for _, to := range numerics.All {
			g, ok := build(t, func(b *graph.Builder) *graph.Value {
				return b.Op("cast", graph.Attrs{"to": graph.DTypeAttr(to)}, b.Input("x", from, 3, 45))
			})
			if !ok {
				t.Fatalf("cast %s -> %s does not build", from, to)
			}
			t.Run(fmt.Sprintf("%s-%s", from, to), func(t *testing.T) { checkStream(t, g, streamTarget, 3) })
		}
	}
}

// TestStreamFusedAndBroadcastEmulated: fused groups (intermediates rounded to their dtype, a
// cast inside), broadcast operands (a gather inside the vector loop), constants.
func TestStreamFusedAndBroadcastEmulated(t *testing.T) {
	for _, dt := range []numerics.DType{numerics.F32, numerics.BF16, numerics.F16, numerics.F64, numerics.I32, numerics.F8E4M3} {
		cases := map[string]func(b *graph.Builder) *graph.Value{
			"bias-relu": func(b *graph.Builder) *graph.Value {
				return b.Op("relu", nil, b.Op("add", nil, b.Input("x", dt, 7, 33), b.Input("bias", dt, 33)))
			},
			"bias-aligned": func(b *graph.Builder) *graph.Value { // the bias read in 16-byte runs
				return b.Op("add", nil, b.Input("x", dt, 6, 64), b.Input("bias", dt, 64))
			},
			"col-scale": func(b *graph.Builder) *graph.Value {
				return b.Op("mul", nil, b.Input("x", dt, 9, 40), b.Input("s", dt, 9, 1))
			},
			"fused-cast": func(b *graph.Builder) *graph.Value {
				x, y := b.Input("x", dt, 4, 50), b.Input("y", dt, 4, 50)
				return b.Op("cast", graph.Attrs{"to": graph.DTypeAttr(numerics.F32)}, b.Op("maximum", nil, b.Op("mul", nil, x, y), x))
			},
		}
		for name, fn := range cases {
			g, ok := build(t, fn)
			if !ok {
				t.Fatalf("%s/%s does not build", name, dt)
			}
			t.Run(name+"/"+dt.String(), func(t *testing.T) { checkStream(t, g, streamTarget, 11) })
		}
	}
}

// TestStreamMovementEmulated: reshape (a vector copy), slice at offsets that break and keep
// 16-byte alignment, concat, transpose, for every dtype's special patterns.
func TestStreamMovementEmulated(t *testing.T) {
	for _, dt := range numerics.All {
		cases := map[string]func(b *graph.Builder) *graph.Value{
			"reshape": func(b *graph.Builder) *graph.Value {
				return b.Op("reshape", graph.Attrs{"shape": graph.Ints(-1)}, b.Input("x", dt, 13, 77))
			},
			"slice-odd": func(b *graph.Builder) *graph.Value {
				return b.Op("slice", graph.Attrs{"starts": graph.Ints(1, 3), "ends": graph.Ints(6, 70)}, b.Input("x", dt, 7, 71))
			},
			"slice-rows": func(b *graph.Builder) *graph.Value { // whole rows from row 16: an aligned run
				return b.Op("slice", graph.Attrs{"starts": graph.Ints(16, 0), "ends": graph.Ints(40, 32)}, b.Input("x", dt, 41, 32))
			},
			"slice-aligned": func(b *graph.Builder) *graph.Value { // 16-byte runs inside rows
				return b.Op("slice", graph.Attrs{"starts": graph.Ints(2, 16), "ends": graph.Ints(9, 48)}, b.Input("x", dt, 10, 64))
			},
			"concat-aligned": func(b *graph.Builder) *graph.Value {
				return b.Op("concat", graph.Attrs{"axis": graph.Int(1)}, b.Input("x", dt, 9, 32), b.Input("y", dt, 9, 16))
			},
			"concat": func(b *graph.Builder) *graph.Value {
				return b.Op("concat", graph.Attrs{"axis": graph.Int(1)}, b.Input("x", dt, 9, 35), b.Input("y", dt, 9, 12))
			},
			"transpose": func(b *graph.Builder) *graph.Value {
				return b.Op("transpose", graph.Attrs{"perm": graph.Ints(1, 0)}, b.Input("x", dt, 19, 45))
			},
		}
		for name, fn := range cases {
			g, ok := build(t, fn)
			if !ok {
				t.Fatalf("%s/%s does not build", name, dt)
			}
			t.Run(name+"/"+dt.String(), func(t *testing.T) { checkStream(t, g, streamTarget, 5) })
		}
	}
}

// TestStreamMovesSixteenBytes: on the bench shapes (8192^2) the stream kernels move every
// byte with 16-byte accesses, have at least four 16-byte loads per thread in flight, and
// launch a grid sized from the SM count (4 CTAs per SM).
func TestStreamMovesSixteenBytes(t *testing.T) {
	const n = 8192
	for _, tc := range []struct {
		name  string
		loads int // 16-byte loads per loop iteration
		build func(b *graph.Builder) *graph.Value
	}{
		{"copy/f32", 4, func(b *graph.Builder) *graph.Value {
			return b.Op("reshape", graph.Attrs{"shape": graph.Ints(-1)}, b.Input("x", numerics.F32, n, n))
		}},
		{"copy/bf16", 4, func(b *graph.Builder) *graph.Value {
			return b.Op("reshape", graph.Attrs{"shape": graph.Ints(-1)}, b.Input("x", numerics.BF16, n, n))
		}},
		{"add/f32", 8, func(b *graph.Builder) *graph.Value {
			return b.Op("add", nil, b.Input("x", numerics.F32, n, n), b.Input("y", numerics.F32, n, n))
		}},
		{"add/bf16", 8, func(b *graph.Builder) *graph.Value {
			return b.Op("add", nil, b.Input("x", numerics.BF16, n, n), b.Input("y", numerics.BF16, n, n))
		}},
		{"cast/f32-bf16", 4, func(b *graph.Builder) *graph.Value {
			return b.Op("cast", graph.Attrs{"to": graph.DTypeAttr(numerics.BF16)}, b.Input("x", numerics.F32, n, n))
		}},
		{"gelu/bf16", 4, func(b *graph.Builder) *graph.Value {
			return b.Op("gelu", nil, b.Input("x", numerics.BF16, n, n))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, ok := build(t, tc.build)
			if !ok {
				t.Fatal("does not build")
			}
			p, err := compiler.Compile(g, compiler.Options{})
			if err != nil {
				t.Fatal(err)
			}
			m, err := Generate(p.Kernels[0], H100)
			if err != nil {
				t.Fatal(err)
			}
			if m.Path != "simt-stream" || m.Grid != [3]int{132 * streamCTAsPerSM, 1, 1} {
				t.Fatalf("path %s grid %v", m.Path, m.Grid)
			}
			if err := checkPTX(m.PTX, len(p.Kernels[0].Params)); err != nil {
				t.Fatal(err)
			}
			for _, scalar := range []string{"ld.global.f32", "ld.global.b16", "ld.global.b32", "st.global.b32", "st.global.b16"} {
				if strings.Contains(m.PTX, scalar+" ") {
					t.Errorf("a scalar access %s on a shape without ragged edges", scalar)
				}
			}
			if got := strings.Count(m.PTX, "ld.global.v4.b32"); got < tc.loads {
				t.Errorf("%d 16-byte loads per iteration, want >= %d", got, tc.loads)
			}
			if !strings.Contains(m.PTX, "st.global.v4.b32") {
				t.Errorf("no 16-byte store")
			}
		})
	}
}

// TestTransposeEmulated: transposes whose dims are multiples of the vector width take the
// shared-memory tile lowering, with ragged tiles (96 = 64 + 32), a batch dim, a 3-D
// permutation that collapses to a 2-D one, and every dtype's special patterns (bits moved).
func TestTransposeEmulated(t *testing.T) {
	for _, dt := range numerics.All {
		cases := map[string]func(b *graph.Builder) *graph.Value{
			"2d": func(b *graph.Builder) *graph.Value {
				return b.Op("transpose", graph.Attrs{"perm": graph.Ints(1, 0)}, b.Input("x", dt, 128, 96))
			},
			"batched": func(b *graph.Builder) *graph.Value {
				return b.Op("transpose", graph.Attrs{"perm": graph.Ints(0, 2, 1)}, b.Input("x", dt, 3, 48, 80))
			},
			"perm201": func(b *graph.Builder) *graph.Value {
				return b.Op("transpose", graph.Attrs{"perm": graph.Ints(2, 0, 1)}, b.Input("x", dt, 16, 32, 48))
			},
		}
		for name, fn := range cases {
			g, ok := build(t, fn)
			if !ok {
				t.Fatalf("%s/%s does not build", name, dt)
			}
			t.Run(name+"/"+dt.String(), func(t *testing.T) { checkFastPath(t, g, streamTarget, 5, "simt-transpose", 8) })
		}
	}
}

// TestTransposeMovesSixteenBytes: the bench transpose (bf16 8192^2) loads and stores only
// 16-byte vectors in global memory.
func TestTransposeMovesSixteenBytes(t *testing.T) {
	g, ok := build(t, func(b *graph.Builder) *graph.Value {
		return b.Op("transpose", graph.Attrs{"perm": graph.Ints(1, 0)}, b.Input("x", numerics.BF16, 8192, 8192))
	})
	if !ok {
		t.Fatal("does not build")
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Generate(p.Kernels[0], H100)
	if err != nil {
		t.Fatal(err)
	}
	if m.Path != "simt-transpose" || m.Grid[0] != 128*128 {
		t.Fatalf("path %s grid %v", m.Path, m.Grid)
	}
	if err := checkPTX(m.PTX, 2); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(m.PTX, "ld.global.b16") || strings.Contains(m.PTX, "st.global.b16") ||
		strings.Count(m.PTX, "ld.global.v4.b32") != 2 || strings.Count(m.PTX, "st.global.v4.b32") != 2 {
		t.Errorf("want two 16-byte loads and stores per thread and no 2-byte global access")
	}
}

// TestStreamRunsInsideRows: aligned slices, concat destinations and a broadcast bias are
// moved in 16-byte runs, not element by element.
func TestStreamRunsInsideRows(t *testing.T) {
	for name, fn := range map[string]func(b *graph.Builder) *graph.Value{
		"slice": func(b *graph.Builder) *graph.Value {
			return b.Op("slice", graph.Attrs{"starts": graph.Ints(2, 16), "ends": graph.Ints(9, 48)}, b.Input("x", numerics.F32, 10, 64))
		},
		"concat": func(b *graph.Builder) *graph.Value {
			return b.Op("concat", graph.Attrs{"axis": graph.Int(1)}, b.Input("x", numerics.F32, 9, 32), b.Input("y", numerics.F32, 9, 16))
		},
		"bias": func(b *graph.Builder) *graph.Value {
			return b.Op("add", nil, b.Input("x", numerics.F32, 6, 64), b.Input("bias", numerics.F32, 64))
		},
	} {
		g, ok := build(t, fn)
		if !ok {
			t.Fatalf("%s does not build", name)
		}
		p, err := compiler.Compile(g, compiler.Options{})
		if err != nil {
			t.Fatal(err)
		}
		m, err := Generate(p.Kernels[0], H100)
		if err != nil {
			t.Fatal(err)
		}
		if m.Path != "simt-stream" || strings.Contains(m.PTX, "ld.global.b32 ") || strings.Contains(m.PTX, "ld.global.f32 ") ||
			strings.Contains(m.PTX, "st.global.b32 ") || !strings.Contains(m.PTX, "ld.global.v4.b32") {
			t.Errorf("%s: path %s, or an element-wise global access where 16-byte runs fit", name, m.Path)
		}
	}
}

// TestStreamRandomGraphsEmulated: seeded random elementwise chains (1 to 3 ops, a cast, a
// broadcast operand) and movement ops on random small shapes, each on the fast path against
// the SIMT path and the CPU backend.
func TestStreamRandomGraphsEmulated(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 1))
	floats := []numerics.DType{numerics.F32, numerics.BF16, numerics.F16, numerics.F64, numerics.F8E4M3, numerics.F8E5M2}
	unary := []string{"neg", "abs", "relu", "exp", "tanh", "sigmoid", "sqrt", "sign"}
	binary := []string{"add", "sub", "mul", "div", "maximum", "minimum"}
	shape := func() []int {
		s := make([]int, 1+rng.IntN(3))
		for i := range s {
			s[i] = 1 + rng.IntN(40)
			if rng.IntN(3) == 0 {
				s[i] = 16 * (1 + rng.IntN(4)) // aligned rows sometimes
			}
		}
		return s
	}
	for i := range 60 {
		dt := floats[rng.IntN(len(floats))]
		sh := shape()
		var fn func(b *graph.Builder) *graph.Value
		var path string
		switch rng.IntN(4) {
		case 0, 1: // elementwise chain
			path = "simt-stream"
			fn = func(b *graph.Builder) *graph.Value {
				x := b.Input("x", dt, sh...)
				v := x
				for range 1 + rng.IntN(3) {
					if rng.IntN(2) == 0 {
						v = b.Op(unary[rng.IntN(len(unary))], nil, v)
						continue
					}
					ysh := sh
					if len(sh) > 1 && rng.IntN(2) == 0 {
						ysh = sh[len(sh)-1:] // broadcast over the leading dims
					}
					v = b.Op(binary[rng.IntN(len(binary))], nil, v, b.Input(fmt.Sprintf("y%d", rng.IntN(1000)), dt, ysh...))
				}
				if rng.IntN(2) == 0 {
					v = b.Op("cast", graph.Attrs{"to": graph.DTypeAttr(numerics.All[rng.IntN(len(numerics.All))])}, v)
				}
				return v
			}
		case 2: // slice
			path = "simt-stream"
			fn = func(b *graph.Builder) *graph.Value {
				starts, ends := make([]int64, len(sh)), make([]int64, len(sh))
				for d, n := range sh {
					starts[d] = int64(rng.IntN(n))
					ends[d] = starts[d] + 1 + int64(rng.IntN(n-int(starts[d])))
				}
				return b.Op("slice", graph.Attrs{"starts": graph.Ints(starts...), "ends": graph.Ints(ends...)}, b.Input("x", dt, sh...))
			}
		default: // transpose (tiled where aligned)
			path = ""
			fn = func(b *graph.Builder) *graph.Value {
				perm := rng.Perm(len(sh))
				p := make([]int64, len(perm))
				for k, v := range perm {
					p[k] = int64(v)
				}
				return b.Op("transpose", graph.Attrs{"perm": graph.Ints(p...)}, b.Input("x", dt, sh...))
			}
		}
		g, ok := build(t, fn)
		if !ok {
			continue
		}
		p, err := compiler.Compile(g, compiler.Options{})
		if err != nil || len(p.Kernels) != 1 {
			continue // more than one kernel: not a single stream
		}
		if path == "" {
			m, err := Generate(p.Kernels[0], streamTarget)
			if err != nil {
				t.Fatal(err)
			}
			if path = m.Path; path != "simt-stream" && path != "simt-transpose" {
				continue // an identity permutation compiles to something else
			}
		}
		t.Run(fmt.Sprintf("%d/%s/%v/%s", i, dt, sh, path), func(t *testing.T) {
			checkFastPath(t, g, streamTarget, uint64(i), path, 8)
		})
	}
}

// TestStreamLoadsInFlight: the bf16 -> f32 cast takes chunks of 16 bytes of f32 output, so a
// lane's chunk is one 16-byte store (a warp-wide store writes 512 contiguous bytes, not 32
// half sectors) and one 8-byte load (256 contiguous bytes), and still keeps 64 bytes of loads
// in flight.
func TestStreamLoadsInFlight(t *testing.T) {
	g, ok := build(t, func(b *graph.Builder) *graph.Value {
		return b.Op("cast", graph.Attrs{"to": graph.DTypeAttr(numerics.F32)}, b.Input("x", numerics.BF16, 8192, 8192))
	})
	if !ok {
		t.Fatal("does not build")
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Generate(p.Kernels[0], H100)
	if err != nil {
		t.Fatal(err)
	}
	loads, stores := strings.Count(m.PTX, "ld.global.v2.b32"), strings.Count(m.PTX, "st.global.v4.b32")
	if loads < 2*streamMinLoads || strings.Contains(m.PTX, "ld.global.v4.b32") {
		t.Errorf("%d 8-byte loads per iteration, want >= %d and no 16-byte ones", loads, 2*streamMinLoads)
	}
	if stores != loads || strings.Contains(m.PTX, "+16]") {
		t.Errorf("%d 16-byte stores for %d chunks, or a chunk stored in two parts", stores, loads)
	}
}
