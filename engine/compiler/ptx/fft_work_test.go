package ptx

import (
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// TestFFTBufferChains: every chain the assigner returns is one the passes can run (each
// buffer differs from the one before, the first from the source, the last from the
// destination tile when the last pass writes that tile), and it uses no more extra buffers
// than a brute-force search needs.
func TestFFTBufferChains(t *testing.T) {
	sets := [][]int{nil, {fftBufSrc}, {fftBufDst}, {fftBufSrc, fftBufDst}}
	for passes := 1; passes <= 9; passes++ {
		for _, tiles := range sets {
			for _, dstTile := range []bool{true, false} {
				bufs, extras := assignFFTBuffers(passes, tiles, dstTile)
				if len(bufs) != passes-1 {
					t.Fatalf("T=%d tiles %v: %d buffers, want %d", passes, tiles, len(bufs), passes-1)
				}
				prev := fftBufSrc
				for i, b := range bufs {
					if b == prev || b >= fftBufExtra+extras || (i == len(bufs)-1 && dstTile && b == fftBufDst) {
						t.Fatalf("T=%d tiles %v dstTile=%v: chain %v breaks at %d", passes, tiles, dstTile, bufs, i)
					}
					prev = b
				}
				if want := fewestExtras(passes-1, tiles, dstTile); extras != want {
					t.Fatalf("T=%d tiles %v dstTile=%v: %d extras, %d do", passes, tiles, dstTile, extras, want)
				}
			}
		}
	}
}

// fewestExtras tries every assignment of n buffers from tiles plus e extras, e = 0, 1, 2.
func fewestExtras(n int, tiles []int, dstTile bool) int {
	for e := 0; ; e++ {
		cands := append([]int(nil), tiles...)
		for i := range e {
			cands = append(cands, fftBufExtra+i)
		}
		var try func(i, prev int) bool
		try = func(i, prev int) bool {
			if i == n {
				return !(dstTile && prev == fftBufDst && n > 0)
			}
			for _, b := range cands {
				if b != prev && try(i+1, b) {
					return true
				}
			}
			return false
		}
		if try(0, fftBufSrc) {
			return e
		}
	}
}

func hasScratch(m *Module) bool {
	for _, x := range m.Extra {
		if x.Name == "fft scratch" {
			return true
		}
	}
	return false
}

// TestFFTWorkPlacement: where the generator puts the work rows on the bench's shapes and on
// the limits, read from the module (shared-memory size, launcher buffers, the PTX itself).
func TestFFTWorkPlacement(t *testing.T) {
	// 1024 = 4^5, 4 rows a CTA: Load and Store taken over, two 32 KiB buffers in shared
	// memory, nothing in global scratch, no shared-memory tile traffic but the passes'.
	m := opModule(t, "fft", numerics.F32, nil, 16384, 1024, 2)
	if hasScratch(m) || m.SharedBytes != 16+2*4*1024*8 || strings.Contains(m.PTX, "ld.shared.f32") || strings.Contains(m.PTX, "st.shared.f32") {
		t.Errorf("fft f32 16384x1024: shared %d, scratch %v, scalar shared accesses %v", m.SharedBytes, hasScratch(m), strings.Contains(m.PTX, ".shared.f32"))
	}
	// 169 = 13 13: both ends radix 13, so the tiles stay; the chain needs one extra buffer.
	m = opModule(t, "fft", numerics.F32, nil, 2, 169, 2)
	if hasScratch(m) || !strings.Contains(m.PTX, "ld.shared.f32") {
		t.Errorf("fft f32 2x169: scratch %v, tile reads %v", hasScratch(m), strings.Contains(m.PTX, "ld.shared.f32"))
	}
	// Bluestein 257 through 1024, 16 rows: two 128 KiB buffers do not fit, global scratch.
	m = opModule(t, "fft", numerics.F32, nil, 64, 257, 2)
	if !hasScratch(m) || strings.Contains(m.PTX, ".shared.v2") {
		t.Errorf("fft f32 64x257: scratch %v, shared work %v", hasScratch(m), strings.Contains(m.PTX, ".shared.v2"))
	}
	// A row of 2^14 f64 points: the tiles it would have needed (512 KiB) are never made, so
	// it lowers, its work in global scratch.
	m = opModule(t, "irfft", numerics.F64, graph.Attrs{"n": graph.Int(16384)}, 1, 8193, 2)
	if !hasScratch(m) || m.SharedBytes > maxShared {
		t.Errorf("irfft f64 n=16384: scratch %v, shared %d", hasScratch(m), m.SharedBytes)
	}
}

// TestFFTPlantedErrorsFail: the bit test can fail on every path: the last pass's first
// twiddle product (the innermost pass's twiddles are all 1) turned into a sum in the
// generated PTX changes the output.
func TestFFTPlantedErrorsFail(t *testing.T) {
	for _, pc := range fftPathCases {
		t.Run(pc.name, func(t *testing.T) {
			defer func(s, f bool) { fftSharedWork, fftFuseLoadStore = s, f }(fftSharedWork, fftFuseLoadStore)
			fftSharedWork, fftFuseLoadStore = pc.shared, pc.fuse
			for _, tc := range []struct {
				c  fftCase
				dt numerics.DType
			}{
				{fftCase{"fft", []int{2, 12, 2}, nil}, numerics.F32},
				{fftCase{"irfft", []int{3, 8, 2}, graph.Attrs{"n": graph.Int(15)}}, numerics.F64},
				{fftCase{"fft", []int{2, 17, 2}, nil}, numerics.F32},
			} {
				got, want := fftEmulated(t, tc.c, tc.dt, 7, func(s string) string {
					i := strings.LastIndex(s, "// fft n=")
					i += strings.Index(s[i:], "mul.rn.f64")
					return s[:i] + "add.rn.f64" + s[i+len("mul.rn.f64"):]
				})
				same := true
				for j := range got.Len() {
					same = same && got.Bits(j) == want.Bits(j)
				}
				if same {
					t.Errorf("%s: the planted error left every bit as the cpu's", tc.c.name(tc.dt))
				}
			}
		})
	}
}

// TestFFTThreads: a kernel of small-radix FFT work with enough butterflies gets 512 threads
// (1024 when one CTA fills an SM's shared memory), TESSERA_PTX_FFT sets it (and the 1024-thread CTA gives the cpu's bits too), a wide radix
// keeps 256, and an unknown option is refused with a coded error.
func TestFFTThreads(t *testing.T) {
	if m := opModule(t, "fft", numerics.F32, nil, 16384, 1024, 2); m.Threads != 512 {
		t.Errorf("fft f32 16384x1024: %d threads, want 512", m.Threads)
	}
	// r2c 1024 holds 8 rows a CTA: its two 64 KiB buffers leave room for one CTA an SM.
	if m := opModule(t, "rfft", numerics.F32, nil, 16384, 1024); m.Threads != 1024 || m.SharedBytes <= fftOneCTAShared {
		t.Errorf("rfft f32 16384x1024: %d threads, %d B shared; want 1024 threads, one CTA an SM", m.Threads, m.SharedBytes)
	}
	if m := opModule(t, "fft", numerics.F32, nil, 64, 7*64, 2); m.Threads != simtThreads {
		t.Errorf("fft f32 64x448 (a radix-7 pass): %d threads, want %d", m.Threads, simtThreads)
	}
	t.Setenv(fftEnv, "threads=1024,global")
	c := fftCase{"fft", []int{4, 1024, 2}, nil}
	got, want := fftEmulated(t, c, numerics.F32, 3, func(s string) string {
		if !strings.Contains(s, ".maxntid 1024,") || strings.Contains(s, ".shared.v2") {
			t.Errorf("%s=threads=1024,global: the module is not a 1024-thread CTA with global work", fftEnv)
		}
		return s
	})
	for j := range got.Len() {
		if got.Bits(j) != want.Bits(j) {
			t.Fatalf("1024 threads: element %d: %#x, cpu %#x", j, got.Bits(j), want.Bits(j))
		}
	}
	t.Setenv(fftEnv, "threads=300")
	b := graph.NewBuilder("fft")
	b.Output(b.Op("fft", nil, b.Input("x", numerics.F32, 4, 8, 2)))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Generate(p.Kernels[0], H100)
	if errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), "threads=300") {
		t.Errorf("%s=threads=300: %v, want an E_INPUT naming the option", fftEnv, err)
	}
}

// TestPairAccess: the (re, im) pair shortcut is taken only where both elements are provably
// neighbours with one mask and bounds verdict; each condition broken alone refuses it.
func TestPairAccess(t *testing.T) {
	good := tile.Access{Param: 0, Base: tile.C(0), RowDims: []int{3, 4}, RowStrides: []int{4 * 6 * 2, 2},
		ColDims: []int{6, 2}, ColStrides: []int{4 * 2, 1}, RowStart: tile.C(0), ColStart: tile.C(0), Rows: 4, Cols: 12, Mask: true}
	gen := func(dt numerics.DType, n int) *gen {
		return &gen{k: &tile.Kernel{Params: []tile.Param{{DType: dt, Len: n}}}}
	}
	if !gen(numerics.F32, 144).pairAccess(good) || !gen(numerics.F64, 144).pairAccess(good) {
		t.Fatal("a complex column of f32/f64 is not taken as pairs")
	}
	bad := map[string]func(a *tile.Access) (numerics.DType, int){
		"f16":            func(a *tile.Access) (numerics.DType, int) { return numerics.F16, 144 },
		"odd length":     func(a *tile.Access) (numerics.DType, int) { return numerics.F32, 143 },
		"odd base":       func(a *tile.Access) (numerics.DType, int) { a.Base = tile.C(1); return numerics.F32, 144 },
		"odd col start":  func(a *tile.Access) (numerics.DType, int) { a.ColStart = tile.C(3); return numerics.F32, 144 },
		"odd row stride": func(a *tile.Access) (numerics.DType, int) { a.RowStrides = []int{47, 2}; return numerics.F32, 144 },
		"odd col stride": func(a *tile.Access) (numerics.DType, int) { a.ColStrides = []int{7, 1}; return numerics.F32, 144 },
		"last dim 3":     func(a *tile.Access) (numerics.DType, int) { a.ColDims = []int{4, 3}; return numerics.F32, 144 },
		"last stride 2":  func(a *tile.Access) (numerics.DType, int) { a.ColStrides = []int{8, 2}; return numerics.F32, 144 },
		"odd tile width": func(a *tile.Access) (numerics.DType, int) { a.Cols = 11; return numerics.F32, 144 },
	}
	for name, mod := range bad {
		a := good
		a.RowStrides, a.ColDims, a.ColStrides = slices.Clone(good.RowStrides), slices.Clone(good.ColDims), slices.Clone(good.ColStrides)
		dt, n := mod(&a)
		if gen(dt, n).pairAccess(a) {
			t.Errorf("%s: taken as pairs", name)
		}
	}
}
