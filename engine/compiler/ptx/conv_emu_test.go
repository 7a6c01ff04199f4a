package ptx

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/gradients"
	"github.com/tessera-qa/tessera-qa/harness"
)

// emulateAll runs every kernel of a program in order in the emulator, each buffer in its own
// allocation as the cuda backend keeps them, intermediates and outputs poisoned (0xA5) first,
// and returns the outputs and the path each kernel took.
func emulateAll(t *testing.T, p *compiler.Program, in map[string]*tensor.Tensor, target Target) ([]*tensor.Tensor, []string) {
	t.Helper()
	bufs := make([][]byte, len(p.Buffers))
	for i, b := range p.Buffers {
		bufs[i] = bytes.Repeat([]byte{0xA5}, prod(b.Type.Shape)*b.Type.DType.Size())
	}
	for i, v := range p.Graph.Inputs {
		copy(bufs[p.Inputs[i]], in[v.Name].Data)
	}
	var paths []string
	for _, k := range p.Kernels {
		mod, err := Generate(k, target)
		if err != nil {
			t.Fatalf("kernel %s: %v", k.Name, err)
		}
		m, err := emuParse(mod.PTX)
		if err != nil {
			t.Fatalf("kernel %s: %v", k.Name, err)
		}
		global := make([][]byte, len(k.Params))
		for i, prm := range k.Params {
			global[i] = bufs[prm.Buffer]
		}
		if err := emuRun(m, mod, global); err != nil {
			t.Fatalf("kernel %s (%s): %v", k.Name, mod.Path, err)
		}
		paths = append(paths, k.Op+":"+mod.Path)
	}
	out := make([]*tensor.Tensor, len(p.Outputs))
	for i, b := range p.Outputs {
		ty := p.Buffers[b].Type
		out[i] = tensor.New(ty.DType, ty.Shape)
		copy(out[i].Data, bufs[b])
	}
	return out, paths
}

// convPaths is the path each conv kernel of paths took (the pads' concat kernels left out).
func convPaths(paths []string) []string {
	var out []string
	for _, p := range paths {
		if op, path, _ := strings.Cut(p, ":"); op == "conv1d" || op == "conv2d" {
			out = append(out, path)
		}
	}
	return out
}

// TestConvGoldenEmulated runs every golden conv case's whole program (the padding's concat
// kernels, then the conv) in the emulator, as the cuda golden spec runs it: within the golden
// file's tolerance of the stored float64 model, and bit for bit the CPU backend's output,
// because every one of these convs takes the SIMT path (their c_out blocks are under 16
// rows), which does the CPU backend's arithmetic in its order. The two large-kernel cases
// cost 0.6 s each, so CI runs them in f32 only; TESSERA_SPECTRAL_FULL=1 runs every dtype.
func TestConvGoldenEmulated(t *testing.T) {
	files, err := golden.LoadAll(golden.Data())
	if err != nil {
		t.Fatal(err)
	}
	full := os.Getenv("TESSERA_SPECTRAL_FULL") == "1"
	cpu, _ := backend.Get("cpu")
	n := 0
	for _, f := range files {
		if f.Op != "conv1d" && f.Op != "conv2d" {
			continue
		}
		for _, c := range f.Cases {
			if big := strings.Contains(c.Name, "k15-") || strings.Contains(c.Name, "k63-"); big && !full && f.DType != numerics.F32 {
				continue
			}
			p, err := compiler.Compile(c.Graph, compiler.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, paths := emulateAll(t, p, c.Inputs, H100)
			if cp := convPaths(paths); len(cp) != 1 || cp[0] != "simt" {
				t.Errorf("%s: conv kernels took %v, want one on simt", c.Name, cp)
			}
			if r := harness.Check(got[0], c.Want[0], c.Tolerances[0]); !r.Pass {
				t.Errorf("%s: emulated vs %s: %s", c.Name, c.File, r.Reason)
			}
			want, err := cpu.Run(p, c.Inputs)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[0].Data, want[0].Data) {
				r := harness.Check(got[0], want[0], harness.Bitwise())
				t.Errorf("%s: emulated vs cpu backend, bitwise: %s", c.Name, r.Reason)
			}
			n++
		}
	}
	if n < 38 {
		t.Errorf("only %d golden conv cases emulated", n)
	}
}

// TestConvEmulatedShapes covers what the golden cases do not: c_out, tap and position blocks
// all ragged (c_out 40 and 48 against tiles of 32, 9 taps against 16, 40 against two blocks
// of 32, positions against 64),
// padding, stride and dilation on both axes with three groups, and the tensor-core path that
// bf16 and f16 convs with c_out blocks of 16 or more take. Every output is checked against
// engine/ref's float64 definition (padding by bounds test, no desugaring) within the
// reduction-scaled tolerance of its dtype; the SIMT path must also give the CPU backend's
// bits. The tensor-core path sums 16 products before rounding, so it is compared with the
// CPU backend within the same tolerance, and the same program forced onto SIMT must give the
// CPU backend's bits.
func TestConvEmulatedShapes(t *testing.T) {
	type tc struct {
		name  string
		op    string
		dt    numerics.DType
		x, w  []int
		bias  bool
		attrs graph.Attrs
		path  string
	}
	i := graph.Ints
	cases := []tc{
		{"conv2d/f32/groups3-stride2x1-dil1x2-pad1x2", "conv2d", numerics.F32, []int{2, 6, 10, 9}, []int{9, 2, 3, 2}, true,
			graph.Attrs{"groups": graph.Int(3), "stride": i(2, 1), "dilation": i(1, 2), "padding": i(1, 2)}, "simt"},
		{"conv2d/f64/ragged-cout40-pos110", "conv2d", numerics.F64, []int{1, 4, 13, 12}, []int{40, 4, 3, 3}, true, nil, "simt"},
		{"conv2d/bf16/ragged-cout48-tensor", "conv2d", numerics.BF16, []int{2, 5, 11, 9}, []int{48, 5, 3, 3}, true, nil, "mma.sync"},
		{"conv1d/f16/groups2-stride2-dil2-pad3-tensor", "conv1d", numerics.F16, []int{1, 8, 50}, []int{32, 4, 9}, true,
			graph.Attrs{"groups": graph.Int(2), "stride": i(2), "dilation": i(2), "padding": i(3)}, "mma.sync"},
		// 40 taps: two tap blocks of 32 (the second ragged), each two k-steps of 16.
		{"conv1d/bf16/k40-two-tap-blocks-tensor", "conv1d", numerics.BF16, []int{1, 3, 90}, []int{16, 3, 40}, false, nil, "mma.sync"},
	}
	cpu, _ := backend.Get("cpu")
	simt := H100
	simt.SIMTOnly = true
	for _, c := range cases {
		b := graph.NewBuilder("conv")
		in := []*graph.Value{b.Input("x", c.dt, c.x...), b.Input("w", c.dt, c.w...)}
		if c.bias {
			in = append(in, b.Input("b", c.dt, c.w[0]))
		}
		b.Output(b.Op(c.op, c.attrs, in...))
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		inputs, err := harness.RandomInputs(g, 26, nil)
		if err != nil {
			t.Fatal(err)
		}
		k := prod(c.w[1:])
		tol := harness.DefaultTolerance(c.dt).ForReduction(k)
		exact, err := ref.Run(g, inputs)
		if err != nil {
			t.Fatal(err)
		}
		p, err := compiler.Compile(g, compiler.Options{})
		if err != nil {
			t.Fatal(err)
		}
		want, err := cpu.Run(p, inputs)
		if err != nil {
			t.Fatal(err)
		}
		if r := harness.Check(want[0], exact[0], tol); !r.Pass {
			t.Fatalf("%s: cpu backend vs engine/ref: %s", c.name, r.Reason)
		}
		for _, target := range []Target{H100, simt} {
			got, paths := emulateAll(t, p, inputs, target)
			path := c.path
			if target.SIMTOnly {
				path = "simt"
			}
			if cp := convPaths(paths); len(cp) != 1 || cp[0] != path {
				t.Errorf("%s: conv kernels took %v, want one on %s", c.name, cp, path)
				continue
			}
			if r := harness.Check(got[0], exact[0], tol); !r.Pass {
				t.Errorf("%s on %s: emulated vs engine/ref: %s", c.name, path, r.Reason)
			}
			if path != "simt" {
				if r := harness.Check(got[0], want[0], tol); !r.Pass {
					t.Errorf("%s on %s: emulated vs cpu backend: %s", c.name, path, r.Reason)
				}
			} else if !bytes.Equal(got[0].Data, want[0].Data) {
				t.Errorf("%s on simt: emulated vs cpu backend, bitwise: %s", c.name, harness.Check(got[0], want[0], harness.Bitwise()).Reason)
			}
		}
	}
}

// TestConvGradientsEmulated runs the conv gradient cases the cuda gradient specs run (each
// golden conv geometry's backward program: the convs that give dx and dw, their pads, crops
// and reductions) in the emulator: every output bit for bit the CPU backend's, and each
// gradient within gradients.Tolerances of the float64 rule (the backward graph on the golden
// model), the gradient suite's own normwise budget. CI runs f32 and bf16; TESSERA_SPECTRAL_FULL=1
// adds f16 and f64.
func TestConvGradientsEmulated(t *testing.T) {
	cs, err := gradients.Cases([]string{"conv1d", "conv2d"})
	if err != nil {
		t.Fatal(err)
	}
	full := os.Getenv("TESSERA_SPECTRAL_FULL") == "1"
	cpu, _ := backend.Get("cpu")
	n := 0
	for _, c := range cs {
		if !full && c.DType != numerics.F32 && c.DType != numerics.BF16 {
			continue
		}
		vg, feed, rule, err := gradients.Backward(c)
		if err != nil {
			t.Fatal(err)
		}
		p, err := compiler.Compile(vg, compiler.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := emulateAll(t, p, feed, H100)
		want, err := cpu.Run(p, feed)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if !bytes.Equal(got[i].Data, want[i].Data) {
				t.Errorf("%s: output %d: emulated vs cpu backend, bitwise: %s", c.Name, i, harness.Check(got[i], want[i], harness.Bitwise()).Reason)
			}
		}
		grads := got[len(c.Graph.Outputs):]
		if len(grads) != len(rule) || len(rule) < 2 {
			t.Fatalf("%s: %d gradients, the rule has %d", c.Name, len(grads), len(rule))
		}
		for i, g := range grads {
			if e, budget := gradients.NormErr(g, rule[i]), gradients.Tolerances[c.DType].RTol; !(e <= budget) {
				t.Errorf("%s: gradient %d: normwise error %.3g against the float64 rule, budget %.3g", c.Name, i, e, budget)
			}
		}
		n++
	}
	if n < 12 {
		t.Errorf("only %d conv gradient cases emulated", n)
	}
}
