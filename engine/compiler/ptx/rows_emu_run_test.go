package ptx

import (
	"bytes"
	"math"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/harness"
)

// emulateProgram runs a one-kernel program's fast row module in the emulator on the given
// inputs and returns its output; the output buffer starts poisoned (0xFF bytes), so an
// element the kernel never writes shows.
func emulateProgram(t *testing.T, p *compiler.Program, in map[string]*tensor.Tensor) (*tensor.Tensor, *Module) {
	t.Helper()
	k := p.Kernels[0]
	mod, err := Generate(k, H100)
	if err != nil {
		t.Fatal(err)
	}
	if mod.Path != "simt-rows" {
		t.Fatalf("kernel took path %s", mod.Path)
	}
	m, err := emuParse(mod.PTX)
	if err != nil {
		t.Fatal(err)
	}
	byBuf := map[int]*tensor.Tensor{}
	for i, v := range p.Graph.Inputs {
		byBuf[p.Inputs[i]] = in[v.Name]
	}
	outBuf := p.Outputs[0]
	ot := p.Buffers[outBuf].Type
	out := tensor.New(ot.DType, ot.Shape)
	for i := range out.Data {
		out.Data[i] = 0xFF
	}
	global := make([][]byte, len(k.Params))
	for i, prm := range k.Params {
		switch {
		case prm.Buffer == outBuf:
			global[i] = out.Data
		case byBuf[prm.Buffer] != nil:
			global[i] = bytes.Clone(byBuf[prm.Buffer].Data)
		default:
			t.Fatalf("param %d (%s) is neither an input nor the output", i, prm.Name)
		}
	}
	if err := emuRun(m, mod, global); err != nil {
		t.Fatal(err)
	}
	return out, mod
}

// checkAgainstCPU compares the emulated fast kernel with the CPU backend: within the
// reduction-scaled tolerance, NaN where the CPU has NaN and with the engine's canonical NaN
// bits, and no element left unwritten.
func checkAgainstCPU(t *testing.T, name string, g *graph.Graph, in map[string]*tensor.Tensor, tol harness.Tolerance) (maxULP uint64) {
	t.Helper()
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cpu, _ := backend.Get("cpu")
	want, err := cpu.Run(p, in)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := emulateProgram(t, p, in)
	size := got.DType.Size()
	for i := range got.Len() {
		if bytes.Equal(got.Data[i*size:(i+1)*size], bytes.Repeat([]byte{0xFF}, size)) {
			t.Errorf("%s: element %d never written", name, i)
			return
		}
		if w := want[0].Float64(i); math.IsNaN(w) && got.Bits(i) != want[0].Bits(i) {
			t.Errorf("%s: element %d: NaN bits %#x, want %#x", name, i, got.Bits(i), want[0].Bits(i))
			return
		}
	}
	r := harness.Check(got, want[0], tol)
	if !r.Pass {
		t.Errorf("%s: fast kernel vs cpu backend: %s", name, r.Reason)
	}
	return r.MaxULP
}

func rowsTol(op string, dt numerics.DType, k int) harness.Tolerance {
	d := harness.DefaultTolerance(dt)
	tol := d.ForReduction(k)
	if op == "softmax" {
		tol.ATol = d.ATol
	}
	return tol
}

// TestRowsEmulatedCatalogue runs every fast-path catalogue row case in the emulator.
func TestRowsEmulatedCatalogue(t *testing.T) {
	n := 0
	for _, s := range golden.Catalogue() {
		if _, ok := rowsOpsUnderTest[s.Op]; !ok || (s.DType != numerics.F32 && s.DType != numerics.F16 && s.DType != numerics.BF16) {
			continue
		}
		if s.Empty {
			continue // no row kernel runs for an empty output (TestEmptyTensorsNeverGiveAZeroGridLaunch)
		}
		in, err := s.Inputs()
		if err != nil {
			t.Fatal(err)
		}
		cols := s.Graph.Nodes[0].Inputs[0].Type.Shape
		if len(cols) == 0 {
			cols = []int{1} // softmax of a scalar (issue 21): one row of one element
		}
		k := cols[len(cols)-1]
		if s.Op == "softmax" || s.Op == "log_softmax" {
			if ax := s.Graph.Nodes[0].IntAttr("axis"); ax == 0 {
				k = cols[0]
			}
		}
		ulp := checkAgainstCPU(t, s.Name, s.Graph, in, rowsTol(s.Op, s.DType, k))
		t.Logf("%-26s max %d ulp from the cpu backend", s.Name, ulp)
		n++
	}
	if n < 36 {
		t.Errorf("only %d catalogue cases emulated", n)
	}
}

// TestRowsEmulatedLayouts covers the layouts the catalogue does not: 16-byte slots of f32,
// bf16 and f16, 4-byte slots, 1024 threads, a row space of two dims, and NaN/Inf rows.
func TestRowsEmulatedLayouts(t *testing.T) {
	type tc struct {
		op    string
		dt    numerics.DType
		shape []int
		attrs graph.Attrs
	}
	for _, c := range []tc{
		{"softmax", numerics.F32, []int{2, 8192}, nil},
		{"softmax", numerics.BF16, []int{2, 8192}, nil},
		{"log_softmax", numerics.F16, []int{2, 2048}, nil},
		{"layernorm", numerics.BF16, []int{2, 8192}, nil},
		{"layernorm", numerics.F32, []int{2, 1000}, graph.Attrs{"eps": graph.Float(0.5)}},
		{"rmsnorm", numerics.F32, []int{2, 16384}, nil},
		{"rmsnorm", numerics.BF16, []int{3, 1030}, nil},
		{"softmax", numerics.BF16, []int{3, 5, 64}, graph.Attrs{"axis": graph.Int(1)}},
	} {
		b := graph.NewBuilder("rows")
		x := b.Input("x", c.dt, c.shape...)
		ins := []*graph.Value{x}
		last := c.shape[len(c.shape)-1]
		if c.op == "layernorm" || c.op == "rmsnorm" {
			ins = append(ins, b.Input("g", c.dt, last))
			if c.op == "layernorm" {
				ins = append(ins, b.Input("b", c.dt, last))
			}
		}
		b.Output(b.Op(c.op, c.attrs, ins...))
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		in, err := harness.RandomInputs(g, 17, nil)
		if err != nil {
			t.Fatal(err)
		}
		k := last
		if c.attrs != nil && c.attrs["axis"].Int == 1 {
			k = c.shape[1]
		}
		name := c.op + "/" + c.dt.String()
		ulp := checkAgainstCPU(t, name, g, in, rowsTol(c.op, c.dt, k))
		t.Logf("%-18s %v max %d ulp from the cpu backend", name, c.shape, ulp)
	}
}

// TestRowsEmulatedSpecials: rows holding NaN, +Inf and only -Inf go the NaN path and give
// the CPU backend's NaNs (canonical bits) and values.
func TestRowsEmulatedSpecials(t *testing.T) {
	for _, dt := range []numerics.DType{numerics.F32, numerics.BF16} {
		for _, op := range []string{"softmax", "log_softmax", "rmsnorm"} {
			b := graph.NewBuilder("rows")
			x := b.Input("x", dt, 4, 256)
			ins := []*graph.Value{x}
			if op == "rmsnorm" {
				ins = append(ins, b.Input("g", dt, 256))
			}
			b.Output(b.Op(op, nil, ins...))
			g, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			in, _ := harness.RandomInputs(g, 5, nil)
			xs := in["x"]
			xs.SetFloat64(1*256+3, math.NaN())
			xs.SetFloat64(2*256+200, math.Inf(1))
			for j := range 256 {
				xs.SetFloat64(3*256+j, math.Inf(-1))
			}
			checkAgainstCPU(t, op+"/"+dt.String()+"/specials", g, in, rowsTol(op, dt, 256).NoGuard())
		}
	}
}

// TestRowsEmulatedGoldenFiles: what the GPU golden specs check, emulated: every golden case
// of the four row ops that takes the fast path matches its stored output under its stored
// tolerance.
func TestRowsEmulatedGoldenFiles(t *testing.T) {
	files, err := golden.LoadAll(golden.Data())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if _, ok := rowsOpsUnderTest[f.Op]; !ok {
			continue
		}
		for _, c := range f.Cases {
			p, err := compiler.Compile(c.Graph, compiler.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Kernels) == 0 {
				continue // every output empty: nothing is launched (TestEmptyTensorsNeverGiveAZeroGridLaunch)
			}
			if m, err := Generate(p.Kernels[0], H100); err != nil || m.Path != "simt-rows" {
				continue
			}
			got, _ := emulateProgram(t, p, c.Inputs)
			if r := harness.Check(got, c.Want[0], c.Tolerances[0]); !r.Pass {
				t.Errorf("%s: vs %s: %s", c.Name, c.File, r.Reason)
			}
			n++
		}
	}
	if n < 36 {
		t.Errorf("only %d golden cases took the fast path", n)
	}
}
