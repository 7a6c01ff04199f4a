package ptx

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// scaledKernel compiles one scaled_matmul a[m,k] x b[n,k]^T -> out and returns its only kernel.
func scaledKernel(t *testing.T, m, n, k int, out numerics.DType) *tile.Kernel {
	t.Helper()
	b := graph.NewBuilder("smm")
	e4 := numerics.F8E4M3
	b.Output(b.Op("scaled_matmul", graph.Attrs{"out_dtype": graph.DTypeAttr(out)}, b.Input("a", e4, m, k), b.Input("b", e4, n, k),
		b.Input("sa", numerics.F32), b.Input("sb", numerics.F32, 1)))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Kernels) != 1 {
		t.Fatalf("%d kernels", len(p.Kernels))
	}
	return p.Kernels[0]
}

func TestScaledGemmMatch(t *testing.T) {
	cases := []struct {
		m, n, k int
		out     numerics.DType
		want    bool
	}{
		{8192, 8192, 8192, numerics.BF16, true},
		{200, 136, 272, numerics.F32, true},
		{8, 8, 16, numerics.F16, true},
		{64, 64, 40, numerics.BF16, false}, // K not a multiple of 16: rows not 16-byte aligned
		{64, 60, 64, numerics.BF16, false}, // N not a multiple of 8
	}
	for _, c := range cases {
		k := scaledKernel(t, c.m, c.n, c.k, c.out)
		s, ok := matchGemm(k)
		if ok != c.want {
			t.Errorf("%+v: matched %v, want %v", c, ok, c.want)
			continue
		}
		if ok && (!s.scaled() || !s.kMajorB || s.dt != numerics.F8E4M3 || s.out != c.out || s.m != c.m || s.n != c.n || s.k != c.k || s.ldb != c.k) {
			t.Errorf("%+v: read %+v", c, s)
		}
	}
	// Without the scale epilogue's exact form the kernel is not the scaled gemm.
	k := scaledKernel(t, 64, 64, 64, numerics.BF16)
	body := append([]tile.Instr{}, k.Body...)
	mul := body[5].(tile.Binary)
	mul.Op = tile.Add
	body[5] = mul
	k.Body = body
	if _, ok := matchGemm(k); ok {
		t.Error("acc + scale matched the scaled gemm")
	}
}

func TestScaledGemmPTX(t *testing.T) {
	k := scaledKernel(t, 8192, 8192, 8192, numerics.BF16)
	m, err := Generate(k, sm90a)
	if err != nil {
		t.Fatal(err)
	}
	if m.Path != "wgmma" || m.Tile != defaultFP8Cfg().String() || m.SharedBytes > maxShared || m.Grid != [3]int{64 * 64, 1, 1} {
		t.Errorf("path %s tile %q shared %d grid %v", m.Path, m.Tile, m.SharedBytes, m.Grid)
	}
	if err := checkPTX(m.PTX, len(k.Params)); err != nil {
		t.Error(err)
	}
	for _, want := range []string{"wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3", "ld.global.f32", "cvt.rn.bf16x2.f32"} {
		if !strings.Contains(m.PTX, want) {
			t.Errorf("no %s in the kernel", want)
		}
	}
	// Without wgmma (sm_90 without a, or SIMTOnly) the general path runs it.
	if m, err := Generate(k, H100); err != nil || m.Tile != "" {
		t.Errorf("H100 without sm_90a: tile %q, err %v", m.Tile, err)
	}
}

// fp8Variants are the fp8 tilings the tests exercise: two promotion sets (the default) and one.
func fp8Variants() []gemmCfg {
	one := defaultFP8Cfg()
	one.wait = 0
	fast := defaultFP8Cfg()
	fast.fastAccum, fast.bn, fast.stages = true, 256, 4
	return []gemmCfg{defaultFP8Cfg(), one, fast}
}

// TestScaledGemmSimulated runs every CTA of the fp8 kernel in the simulator on ragged M, N
// and K tails, every output dtype, with e4m3's special values among the inputs (NaN 0x7F in
// A[0,0], +-448, subnormals), against a float64 reference.
func TestScaledGemmSimulated(t *testing.T) {
	shapes := []struct {
		m, n, k int
		out     numerics.DType
	}{
		{200, 136, 272, numerics.BF16}, // ragged M, N and K tails
		{8, 8, 16, numerics.F32},
		{130, 72, 400, numerics.F16},
		{128, 128, 128, numerics.F32}, // one whole tile, one k-tile: the promotion tail alone
	}
	for si, sh := range shapes {
		k := scaledKernel(t, sh.m, sh.n, sh.k, sh.out)
		s, ok := matchGemm(k)
		if !ok {
			t.Fatalf("%+v not matched", sh)
		}
		for ci, c := range fp8Variants() {
			if !c.valid() {
				t.Fatalf("%s not valid", c)
			}
			if ci > 0 && si > 1 {
				continue // keep the test short: the second tiling on two shapes
			}
			m := gemmKernel(s, c, sm90a, "tq_k0", len(k.Params))
			if err := checkPTX(m.PTX, len(k.Params)); err != nil {
				t.Errorf("%+v %s: %v", sh, c, err)
			}
			if err := simulateScaled(t, m, k, s, int64(si)); err != nil {
				t.Errorf("%+v %s: %v", sh, c, err)
			}
		}
	}
}

// e4m3Specials are drawn now and then instead of a normal value.
var e4m3Specials = []float64{448, -448, 0x1p-9, -0x1p-9, 0x1p-7, 0x7p-9, 0}

func simulateScaled(t *testing.T, m *Module, k *tile.Kernel, s gemmSpec, seed int64) error {
	t.Helper()
	sim, err := newSim(m.PTX, numerics.BF16, m.Threads, m.SharedBytes)
	if err != nil {
		return err
	}
	sim.out = s.out
	rng := rand.New(rand.NewPCG(uint64(seed), 11))
	bufs := make([][]byte, len(k.Params))
	vals := make([][]float64, len(k.Params))
	scales := map[int]float64{s.sa: 0.75, s.sb: 0x1p-6}
	for i, p := range k.Params {
		size := p.DType.Size()
		bufs[i] = make([]byte, size*p.Len)
		vals[i] = make([]float64, p.Len)
		for j := range vals[i] {
			var bits uint64
			switch {
			case p.Output:
				bits = math.MaxUint64 // poison: NaN in every format
			case p.DType == numerics.F32:
				bits = uint64(math.Float32bits(float32(scales[i])))
			case i == s.a && j == 0:
				bits = 0x7F // NaN in A[0,0]: row 0 of C must be NaN
			case rng.IntN(16) == 0:
				bits = numerics.Encode(p.DType, e4m3Specials[rng.IntN(len(e4m3Specials))])
			default:
				bits = numerics.Encode(p.DType, 4*rng.NormFloat64())
			}
			bits &= 1<<(8*size) - 1
			vals[i][j] = numerics.Decode(p.DType, bits)
			for b := range size {
				bufs[i][size*j+b] = byte(bits >> (8 * b))
			}
		}
		base := uint64(i+1) << 32
		sim.global[base] = bufs[i]
		sim.params[m.Entry+"_p"+itoa(i)] = base
	}
	for bx := 0; bx < m.Grid[0]; bx++ {
		sim.ctaid = [2]uint64{uint64(bx), 0}
		if err := sim.run(); err != nil {
			return err
		}
	}
	A, B, C := vals[s.a], vals[s.b], bufs[s.c]
	scale := float64(float32(scales[s.sa]) * float32(scales[s.sb]))
	size := s.out.Size()
	rel := map[numerics.DType]float64{numerics.BF16: 0x1p-8, numerics.F16: 0x1p-11, numerics.F32: 0x1p-23}[s.out]
	bad := 0
	for i := 0; i < s.m; i++ {
		for j := 0; j < s.ldc; j++ {
			at := i*s.ldc + j
			var got uint64
			for b := range size {
				got |= uint64(C[size*at+b]) << (8 * b)
			}
			g := numerics.Decode(s.out, got)
			if j >= s.n {
				if got != 1<<(8*size)-1 {
					bad++
				}
				continue
			}
			if i == 0 {
				if !math.IsNaN(g) || (s.out != numerics.F32 && got != narrowOf[s.out].nan) {
					bad++
				}
				continue
			}
			ref, mag := 0.0, 0.0
			for kk := 0; kk < s.k; kk++ {
				p := A[i*s.lda+kk] * B[j*s.ldb+kk]
				ref, mag = ref+p, mag+math.Abs(p)
			}
			ref, mag = ref*scale, mag*scale
			// f32 sums of 32-k chunks and of k-tiles: a few f32 roundings per output, relative
			// to the magnitude of the terms; then one rounding to the output dtype.
			if !(math.Abs(g-ref) <= rel*math.Abs(ref)+4e-7*mag) {
				if bad < 5 {
					t.Logf("(%d,%d): got %#x (%g) want %g (mag %g)", i, j, got, g, ref, mag)
				}
				bad++
			}
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d outputs wrong", bad, s.m*s.n)
	}
	return nil
}

// TestScaledGemmOneSet: TESSERA_PTX_FP8_SETS=1 picks the one-set tiling, which the simulator
// checks in TestScaledGemmSimulated.
func TestScaledGemmOneSet(t *testing.T) {
	k := scaledKernel(t, 256, 256, 256, numerics.BF16)
	t.Setenv("TESSERA_PTX_FP8_SETS", "1")
	m, err := Generate(k, sm90a)
	if err != nil {
		t.Fatal(err)
	}
	one := defaultFP8Cfg()
	one.wait = 0
	if m.Tile != one.String() {
		t.Errorf("tile %q, want %q", m.Tile, one)
	}
	t.Setenv("TESSERA_PTX_FP8_SETS", "0")
	if m, err = Generate(k, sm90a); err != nil || !strings.Contains(m.Tile, "128x256x128") || !strings.Contains(m.Tile, "fast-accum") ||
		!strings.Contains(m.PTX, "m64n256k32.f32.e4m3.e4m3") {
		t.Errorf("fast accumulation: tile %q, err %v", m.Tile, err)
	}
}
