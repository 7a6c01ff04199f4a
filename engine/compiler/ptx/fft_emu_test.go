package ptx

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/golden"
)

// emulateFFT runs a program's kernels in order in the emulator, their buffers shared from one
// kernel to the next, with extra buffers as the launcher would give them: tables uploaded,
// scratch and every buffer but the inputs poisoned (0xA5), so an element read before it is
// written shows as a wrong bit. edit, when not nil, rewrites each module's PTX first. It
// returns the program's first output and the last kernel's module.
func emulateFFT(t *testing.T, p *compiler.Program, in map[string]*tensor.Tensor, edit func(string) string) (*tensor.Tensor, *Module) {
	t.Helper()
	bufs := map[int]*tensor.Tensor{}
	for i, v := range p.Graph.Inputs {
		bufs[p.Inputs[i]] = in[v.Name].Clone()
	}
	buf := func(i int) *tensor.Tensor {
		if bufs[i] == nil {
			ty := p.Buffers[i].Type
			bufs[i] = tensor.New(ty.DType, ty.Shape)
			for j := range bufs[i].Data {
				bufs[i].Data[j] = 0xA5
			}
		}
		return bufs[i]
	}
	var mod *Module
	for _, k := range p.Kernels {
		var err error
		mod, err = Generate(k, H100)
		if err != nil {
			t.Fatal(err)
		}
		text := mod.PTX
		if edit != nil {
			text = edit(text)
		}
		m, err := emuParse(text)
		if err != nil {
			t.Fatal(err)
		}
		var global [][]byte
		for _, prm := range k.Params {
			global = append(global, buf(prm.Buffer).Data)
		}
		for _, x := range mod.Extra {
			if x.Data != nil {
				if len(x.Data) != x.Bytes {
					t.Fatalf("extra %s: %d bytes of data, declared %d", x.Name, len(x.Data), x.Bytes)
				}
				global = append(global, bytes.Clone(x.Data))
				continue
			}
			global = append(global, bytes.Repeat([]byte{0xA5}, x.Bytes))
		}
		if err := emuRun(m, mod, global); err != nil {
			t.Fatal(err)
		}
	}
	return buf(p.Outputs[0]), mod
}

type fftCase struct {
	op    string
	shape []int
	attrs graph.Attrs
}

func (c fftCase) name(dt numerics.DType) string {
	s := fmt.Sprintf("%s%v", c.op, c.shape)
	for _, k := range c.attrs.Names() {
		s += "," + k + "=" + graph.FormatAttr(c.attrs[k])
	}
	return s + "-" + dt.String()
}

// fftBitsCases cover every tile.FFT kind, radix 2, 4, 3, 5, 7, 11, 13 and their mixes, the
// Bluestein primes 17 and 257 (and 23 through an inverse), N = 1, odd and even c2r, batched
// rows over an inner and an outer axis, padding and cropping, and the three norms' scales.
var fftBitsCases = []fftCase{
	{"fft", []int{3, 8, 2}, nil},
	{"fft", []int{2, 16, 2}, graph.Attrs{"norm": graph.String("ortho")}},
	{"fft", []int{2, 12, 2}, graph.Attrs{"norm": graph.String("forward")}},
	{"fft", []int{1, 2, 2}, nil},
	{"fft", []int{2, 1, 2}, nil},
	{"fft", []int{1, 60, 2}, nil},  // 4 3 5
	{"fft", []int{1, 77, 2}, nil},  // 7 11
	{"fft", []int{1, 26, 2}, nil},  // 2 13
	{"fft", []int{2, 17, 2}, nil},  // Bluestein
	{"fft", []int{1, 257, 2}, nil}, // Bluestein through 1024
	{"ifft", []int{3, 15, 2}, nil}, // 3 5
	{"ifft", []int{2, 23, 2}, graph.Attrs{"norm": graph.String("ortho")}},
	{"ifft", []int{5, 6, 2}, graph.Attrs{"dim": graph.Int(0)}},
	{"ifft", []int{2, 9, 2}, graph.Attrs{"n": graph.Int(12)}},
	{"rfft", []int{4, 16}, nil},
	{"rfft", []int{3, 15}, nil},
	{"rfft", []int{2, 17}, graph.Attrs{"norm": graph.String("ortho")}},
	{"rfft", []int{3, 10}, graph.Attrs{"n": graph.Int(7)}},
	{"rfft", []int{2, 1}, nil},
	{"irfft", []int{4, 9, 2}, nil},                             // n = 16, even
	{"irfft", []int{3, 8, 2}, graph.Attrs{"n": graph.Int(15)}}, // odd
	{"irfft", []int{2, 7, 2}, graph.Attrs{"n": graph.Int(13), "norm": graph.String("forward")}},
	{"irfft", []int{2, 10, 2}, graph.Attrs{"n": graph.Int(18), "norm": graph.String("ortho")}},
	{"irfft", []int{3, 4, 2}, graph.Attrs{"dim": graph.Int(0)}},
	{"irfft", []int{2, 1, 2}, graph.Attrs{"n": graph.Int(1)}},
	{"fft", []int{2, 169, 2}, nil},                                          // 13 13: radix 13 at both ends, no Load/Store taken over
	{"ifft", []int{3, 64, 2}, graph.Attrs{"norm": graph.String("forward")}}, // 4 4 4: an odd chain, tiles as buffers
	{"rfft", []int{5, 40}, graph.Attrs{"dim": graph.Int(0)}},                // lines over the inner axis: strided global reads
	{"fft", []int{4, 512, 2}, nil},                                          // 512 butterflies a pass: a CTA of 512 threads
	{"irfft", []int{8, 129, 2}, nil},                                        // n = 256, 8 rows: 512 threads
}

// fftPathCases are the generator's ways of running a transform: the work buffers in shared
// memory or global scratch, the source and destination read and written in global memory by
// the passes themselves or through the tiles.
var fftPathCases = []struct {
	name         string
	shared, fuse bool
}{
	{"shared+fused", true, true},
	{"shared+tiles", true, false},
	{"global+fused", false, true},
	{"global+tiles", false, false},
}

// TestFFTEmulatedBitsMatchCPU: the generated FFT kernels give the CPU backend's bits, every
// element, for every case in f32 and f64 (the non-Hermitian c2r inputs included: random
// imaginary parts at bins 0 and n/2, which both backends ignore).
// Every case runs in each of fftPathCases.
func TestFFTEmulatedBitsMatchCPU(t *testing.T) {
	for _, pc := range fftPathCases {
		t.Run(pc.name, func(t *testing.T) {
			defer func(s, f bool) { fftSharedWork, fftFuseLoadStore = s, f }(fftSharedWork, fftFuseLoadStore)
			fftSharedWork, fftFuseLoadStore = pc.shared, pc.fuse
			fftBitsMatchCPU(t)
		})
	}
}

func fftBitsMatchCPU(t *testing.T) {
	for i, tc := range fftBitsCases {
		for _, dt := range []numerics.DType{numerics.F32, numerics.F64} {
			t.Run(tc.name(dt), func(t *testing.T) {
				got, want := fftEmulated(t, tc, dt, uint64(i), nil)
				for j := range got.Len() {
					if got.Bits(j) != want.Bits(j) {
						t.Fatalf("element %d of %d: %#x (%g), cpu %#x (%g)", j, got.Len(), got.Bits(j), got.Float64(j), want.Bits(j), want.Float64(j))
					}
				}
			})
		}
	}
}

// fftEmulated runs case tc on the cpu backend and, its PTX passed through edit when not nil,
// in the emulator, on uniform inputs in [-0.5, 0.5) drawn from seed.
func fftEmulated(t *testing.T, tc fftCase, dt numerics.DType, seed uint64, edit func(string) string) (got, want *tensor.Tensor) {
	t.Helper()
	cpu, _ := backend.Get("cpu")
	r := rand.New(rand.NewPCG(seed, 26))
	x := tensor.New(dt, tc.shape)
	for j := range x.Len() {
		x.SetFloat64(j, r.Float64()-0.5)
	}
	b := graph.NewBuilder("fft")
	b.Output(b.Op(tc.op, tc.attrs, b.Input("x", dt, tc.shape...)))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]*tensor.Tensor{"x": x}
	cpuOut, err := cpu.Run(p, in)
	if err != nil {
		t.Fatal(err)
	}
	got, mod := emulateFFT(t, p, in, edit)
	if mod.Path != "simt" {
		t.Fatalf("path %s, want simt", mod.Path)
	}
	return got, cpuOut[0]
}

// TestFFTCatalogueEmulatedBitsMatchCPU: every FFT case of the golden catalogue (the 1-D and
// 2-D forms, f32 and f64; a 2-D form is two kernels) gives the cpu backend's bits in the
// emulator, on the catalogue's own inputs.
func TestFFTCatalogueEmulatedBitsMatchCPU(t *testing.T) {
	cpu, _ := backend.Get("cpu")
	n := 0
	for _, s := range golden.Catalogue() {
		if !strings.Contains(s.Op, "fft") {
			continue
		}
		p, err := compiler.Compile(s.Graph, compiler.Options{})
		if err != nil {
			t.Fatal(err)
		}
		in, err := s.Inputs()
		if err != nil {
			t.Fatal(err)
		}
		want, err := cpu.Run(p, in)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := emulateFFT(t, p, in, nil)
		for j := range got.Len() {
			if got.Bits(j) != want[0].Bits(j) {
				t.Fatalf("%s: element %d of %d: %#x, cpu %#x", s.Name, j, got.Len(), got.Bits(j), want[0].Bits(j))
			}
		}
		n++
	}
	if n < 80 {
		t.Fatalf("%d FFT cases in the catalogue, expected its 88", n)
	}
}
