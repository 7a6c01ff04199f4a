package ptx

import (
	"fmt"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// TestReduceEmulated runs the reduction lowering in the emulator against the SIMT path (same
// bits: the same fold order) and the CPU backend, over rows (the last axis), columns (a leading
// axis), both at once, ragged tiles, several rounds of tiles, every dtype.
func TestReduceEmulated(t *testing.T) {
	type tc struct {
		shape []int
		axes  []int64
		attrs graph.Attrs
	}
	cases := []tc{
		{[]int{5, 37}, []int64{1}, nil},       // rows, one ragged tile
		{[]int{5, 37}, []int64{0}, nil},       // columns
		{[]int{3, 600}, []int64{1}, nil},      // rows, three tiles, the last ragged
		{[]int{600, 8}, []int64{0}, nil},      // columns, three tiles
		{[]int{4, 6, 50}, []int64{0, 2}, nil}, // two axes: the general (scalar) form
		{[]int{2, 9000}, []int64{1}, nil},     // 36 tiles at once
		{[]int{1, 70000}, []int64{1}, nil},    // 274 tiles: two rounds of 256
		{[]int{7, 64}, []int64{1}, graph.Attrs{"keepdims": graph.Bool(true)}},
		{[]int{6, 40}, nil, nil}, // every axis
	}
	ops := []string{"reduce_sum", "reduce_max", "reduce_mean"}
	n := 0
	for _, dt := range numerics.All {
		for _, op := range ops {
			for ci, c := range cases {
				if (ci == 5 || ci == 6) && dt != numerics.F32 && dt != numerics.BF16 {
					continue
				}
				attrs := graph.Attrs{}
				for k, v := range c.attrs {
					attrs[k] = v
				}
				if c.axes != nil {
					attrs["axes"] = graph.Ints(c.axes...)
				}
				g, ok := build(t, func(b *graph.Builder) *graph.Value { return b.Op(op, attrs, b.Input("x", dt, c.shape...)) })
				if !ok {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/%v/%v", op, dt, c.shape, c.axes), func(t *testing.T) {
					checkFastPath(t, g, streamTarget, uint64(ci), "simt-reduce", 0)
				})
				if ci == 0 { // NaN, Inf, -0 in the fold
					t.Run(fmt.Sprintf("%s/%s/specials", op, dt), func(t *testing.T) {
						checkFastPath(t, g, streamTarget, uint64(ci), "simt-reduce", 16)
					})
				}
				n++
			}
		}
	}
	// Accumulators other than the default: 16-bit (rounded every step) and int32 over int8
	// (wrapped, then narrowed).
	for _, c := range []struct {
		dt, acc numerics.DType
	}{{numerics.F32, numerics.BF16}, {numerics.BF16, numerics.F16}, {numerics.I8, numerics.I32}, {numerics.F32, numerics.F64}} {
		g, ok := build(t, func(b *graph.Builder) *graph.Value {
			return b.Op("reduce_sum", graph.Attrs{"axes": graph.Ints(1), "accum": graph.DTypeAttr(c.acc)}, b.Input("x", c.dt, 9, 300))
		})
		if !ok {
			t.Fatalf("accum %s over %s does not build", c.acc, c.dt)
		}
		t.Run(fmt.Sprintf("accum-%s/%s", c.acc, c.dt), func(t *testing.T) { checkFastPath(t, g, streamTarget, 9, "simt-reduce", 0) })
		n++
	}
	if n < 150 {
		t.Errorf("only %d cases ran", n)
	}
}

// TestReduceMovesSixteenBytes: on the bench shapes (f32 8192^2 over rows and over columns)
// every load is 16 bytes, and the grid depends on the shape only.
func TestReduceMovesSixteenBytes(t *testing.T) {
	for _, op := range []string{"reduce_sum", "reduce_max"} {
		for _, axis := range []int64{0, 1} {
			g, ok := build(t, func(b *graph.Builder) *graph.Value {
				return b.Op(op, graph.Attrs{"axes": graph.Ints(axis)}, b.Input("x", numerics.F32, 8192, 8192))
			})
			if !ok {
				t.Fatal("does not build")
			}
			p, err := compiler.Compile(g, compiler.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var grids [][3]int
			var texts []string
			for _, sms := range []int{132, 7} {
				target := H100
				target.SMs = sms
				m, err := Generate(p.Kernels[0], target)
				if err != nil {
					t.Fatal(err)
				}
				if m.Path != "simt-reduce" {
					t.Fatalf("%s axis %d: path %s", op, axis, m.Path)
				}
				if err := checkPTX(m.PTX, len(p.Kernels[0].Params)); err != nil {
					t.Fatal(err)
				}
				if strings.Contains(m.PTX, "ld.global.f32 ") || strings.Count(m.PTX, "ld.global.v4.b32") < reduceUnroll+1 {
					t.Errorf("%s axis %d: scalar loads or fewer than %d 16-byte loads in flight", op, axis, reduceUnroll)
				}
				grids, texts = append(grids, m.Grid), append(texts, m.PTX)
			}
			if grids[0] != grids[1] || texts[0] != texts[1] {
				t.Errorf("%s axis %d: the grid or the code depends on the SM count: %v", op, axis, grids)
			}
		}
	}
}

// TestReduceMaxSignedZeros: rows whose max is a zero of either sign, or NaN, where only the
// exact max rule (+0 over -0, NaN wins) decides the bits; over rows and over columns.
func TestReduceMaxSignedZeros(t *testing.T) {
	negZero := math.Copysign(0, -1)
	for _, dt := range []numerics.DType{numerics.F32, numerics.BF16, numerics.F64} {
		for _, axis := range []int64{0, 1} {
			g, ok := build(t, func(b *graph.Builder) *graph.Value {
				return b.Op("reduce_max", graph.Attrs{"axes": graph.Ints(axis)}, b.Input("x", dt, 8, 600))
			})
			if !ok {
				t.Fatal("does not build")
			}
			p, err := compiler.Compile(g, compiler.Options{})
			if err != nil {
				t.Fatal(err)
			}
			x := tensor.New(dt, []int{8, 600})
			for i := range x.Len() {
				r, c := i/600, i%600
				v := -1.0 - float64(c%7)
				switch {
				case r%4 == 0: // all -0
					v = negZero
				case r%4 == 1 && c%5 == 0: // -0 and +0 as the max
					v = []float64{negZero, 0}[c%2]
				case r%4 == 2 && c == 599: // NaN in the last, ragged tile
					v = math.NaN()
				}
				x.SetFloat64(i, v)
			}
			in := map[string]*tensor.Tensor{"x": x}
			cpu, _ := backend.Get("cpu")
			want, err := cpu.Run(p, in)
			if err != nil {
				t.Fatal(err)
			}
			got, mod := emulateWith(t, p, in, streamTarget)
			if mod.Path != "simt-reduce" {
				t.Fatalf("path %s", mod.Path)
			}
			for i := range got.Len() {
				if got.Bits(i) != want[0].Bits(i) && !(dt == numerics.F64 && math.IsNaN(got.Float64(i)) && math.IsNaN(want[0].Float64(i))) {
					t.Fatalf("%s axis %d: element %d: got %#x, want %#x", dt, axis, i, got.Bits(i), want[0].Bits(i))
				}
			}
		}
	}
}

// TestReduceRandomEmulated: seeded random shapes (ragged and 16-aligned dims), axes, ops and
// dtypes on the reduction lowering against the SIMT path and the CPU backend.
func TestReduceRandomEmulated(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 2))
	dts := []numerics.DType{numerics.F32, numerics.BF16, numerics.F16, numerics.F64, numerics.I32, numerics.I8}
	ops := []string{"reduce_sum", "reduce_max", "reduce_mean"}
	n := 0
	for i := range 80 {
		dt, op := dts[rng.IntN(len(dts))], ops[rng.IntN(len(ops))]
		sh := make([]int, 1+rng.IntN(3))
		for d := range sh {
			sh[d] = 1 + rng.IntN(70)
			if rng.IntN(2) == 0 {
				sh[d] = 4 * (1 + rng.IntN(80)) // multiples of 4, up to 320 (two tiles)
			}
		}
		for prod(sh) > 40000 { // keep the emulation short
			big := 0
			for d := range sh {
				if sh[d] > sh[big] {
					big = d
				}
			}
			sh[big] /= 2
		}
		var axes []int64
		for d := range sh {
			if rng.IntN(2) == 0 {
				axes = append(axes, int64(d))
			}
		}
		if len(axes) == 0 {
			axes = []int64{int64(rng.IntN(len(sh)))}
		}
		g, ok := build(t, func(b *graph.Builder) *graph.Value {
			return b.Op(op, graph.Attrs{"axes": graph.Ints(axes...)}, b.Input("x", dt, sh...))
		})
		if !ok {
			continue
		}
		p, err := compiler.Compile(g, compiler.Options{})
		if err != nil || len(p.Kernels) != 1 {
			continue
		}
		if m, err := Generate(p.Kernels[0], streamTarget); err != nil || m.Path != "simt-reduce" {
			continue
		}
		n++
		t.Run(fmt.Sprintf("%d/%s/%s/%v/%v", i, op, dt, sh, axes), func(t *testing.T) {
			checkFastPath(t, g, streamTarget, uint64(i), "simt-reduce", 0)
		})
	}
	if n < 50 {
		t.Errorf("only %d random reductions took the reduction lowering", n)
	}
}

// TestReduceLanePairsEmulated: reductions over rows whose tiles two lanes share (16-byte
// loads of 32-bit words), at the mapping's edges: a V-block count that is odd (the last pair
// block has no odd half), a row shorter than a tile, a single V-block, tile counts that are no
// multiple of the pairs per row group, more tiles than pairs (rounds), and NaN, Inf and -0
// every few elements; each against the SIMT path and the CPU backend, bit for bit.
func TestReduceLanePairsEmulated(t *testing.T) {
	cases := []struct {
		dt    numerics.DType
		shape []int
	}{
		{numerics.F32, []int{3, 36}},        // 9 V-blocks: the last pair block is half
		{numerics.F32, []int{5, 4}},         // one V-block: the odd lane never loads
		{numerics.F32, []int{2, 12}},        // a row shorter than a tile, 3 V-blocks
		{numerics.F32, []int{7, 788}},       // 4 tiles, the last ragged (5 V-blocks)
		{numerics.F32, []int{3, 1300}},      // 6 tiles of 8 slots: no multiple, ragged
		{numerics.BF16, []int{4, 56}},       // bf16: 7 V-blocks of 8
		{numerics.BF16, []int{3, 2056}},     // bf16: 9 tiles
		{numerics.F16, []int{2, 24}},        // f16: 3 V-blocks
		{numerics.I32, []int{3, 44}},        // int accumulator, 11 V-blocks
		{numerics.F32, []int{1, 256 * 129}}, // 129 tiles: two rounds of 128 pairs
	}
	n := 0
	for _, c := range cases {
		for _, op := range []string{"reduce_sum", "reduce_max", "reduce_mean"} {
			g, ok := build(t, func(b *graph.Builder) *graph.Value {
				return b.Op(op, graph.Attrs{"axes": graph.Ints(1)}, b.Input("x", c.dt, c.shape...))
			})
			if !ok {
				continue
			}
			for _, specials := range []int{0, 30} {
				t.Run(fmt.Sprintf("%s/%s/%v/specials%d", op, c.dt, c.shape, specials), func(t *testing.T) {
					m := checkFastPath(t, g, streamTarget, uint64(len(c.shape)*7+specials), "simt-reduce", specials)
					if !strings.Contains(m.Tile, "2 lanes a tile") {
						t.Fatalf("no lane pairs: %s", m.Tile)
					}
				})
				n++
			}
		}
	}
	if n < 50 {
		t.Errorf("only %d cases ran", n)
	}
}

// TestEmulatorPairShuffle: the emulator's shfl.sync honours its member mask: lane pairs that
// branched apart from the rest of the warp exchange with each other (each lane reads its
// partner's tid), the lanes that skipped keep their poison, and a lane outside the mask it
// names is an error rather than a silent read.
func TestEmulatorPairShuffle(t *testing.T) {
	const text = `.visible .entry tq_t(
	.param .u64 tq_t_p0
)
{
	ld.param.u64 %rd1, [tq_t_p0];
	mov.u32 %r1, %tid.x;
	and.b32 %r2, %r1, 2;
	setp.ne.u32 %p1, %r2, 0;
	@%p1 bra $L_skip;
	and.b32 %r3, %r1, 30;
	mov.u32 %r4, 3;
	shl.b32 %r5, %r4, %r3;
	shfl.sync.bfly.b32 %r6, %r1, 1, 31, MASK;
	mul.wide.s32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.b32 [%rd3], %r6;
$L_skip:
	ret;
}
`
	run := func(mask string) ([]byte, error) {
		m, err := emuParse(strings.Replace(text, "MASK", mask, 1))
		if err != nil {
			t.Fatal(err)
		}
		out := make([]byte, 4*64)
		for i := range out {
			out[i] = 0xEE
		}
		return out, emuRun(m, &Module{Grid: [3]int{1, 1, 1}, Threads: 64}, [][]byte{out})
	}
	out, err := run("%r5")
	if err != nil {
		t.Fatal(err)
	}
	for tid := range 64 {
		got := uint32(out[4*tid]) | uint32(out[4*tid+1])<<8 | uint32(out[4*tid+2])<<16 | uint32(out[4*tid+3])<<24
		want := uint32(tid ^ 1)
		if tid&2 != 0 {
			want = 0xEEEEEEEE
		}
		if got != want {
			t.Errorf("thread %d: got %#x, want %#x", tid, got, want)
		}
	}
	if _, err := run("1"); err == nil || !strings.Contains(err.Error(), "member mask") {
		t.Errorf("a lane outside its shuffle's member mask ran: %v", err)
	}
}
