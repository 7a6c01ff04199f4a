package bench

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// The FFT and conv2d rows (issue 26) on the CPU: the cases pass against the golden model
// standing in for torch, a wrong engine fails both checks, the work counted per run is the
// definition's (bytes of the view_as_real layout; flops from the graph's own MAC count), the
// reference check slices what it should, and the FFT rows are held to the copy bandwidth.
func TestSpectralRows(t *testing.T) {
	cases, err := Select(Selection{Ops: []string{"copy", "fft_c2c", "fft_r2c", "conv2d"},
		Shapes: []string{"copy:8x64", "fft_c2c:6x60", "fft_r2c:5x97", "conv2d:3x4x9x7x6x3"}, DTypes: []string{"f32", "bf16"}})
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(cases))
	for i, c := range cases {
		names[i] = c.String()
	}
	want := "copy/f32/8x64 copy/bf16/8x64 fft_c2c/f32/6x60 fft_r2c/f32/5x97 conv2d/f32/3x4x9x7x6x3 conv2d/bf16/3x4x9x7x6x3"
	if strings.Join(names, " ") != want {
		t.Fatalf("cases %v, want %s (the FFTs keep f32)", names, want)
	}
	rows, dev, err := Run(newFake(t, 1), RefOracle{MS: 2}, cases, Options{Reps: 4, Seed: 26, RefRows: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if !r.Passed() {
			t.Errorf("%s: %s", r.Case, r.Verdict())
		}
		if r.Check.Elements == 0 || r.RefCheck.Elements == 0 {
			t.Errorf("%s: a check compared nothing", r.Case)
		}
	}
	bytesWant := map[string]float64{
		"fft_c2c/f32/6x60": 2 * 6 * 60 * 2 * 4, "fft_r2c/f32/5x97": 5*97*4 + 5*49*2*4,
		"conv2d/f32/3x4x9x7x6x3": 4 * (3*4*9*7 + 6*4*3*3 + 3*6*9*7),
	}
	for _, r := range rows {
		if b, ok := bytesWant[r.Case.String()]; ok && r.Bytes != b {
			t.Errorf("%s: %g bytes a run, want %g", r.Case, r.Bytes, b)
		}
	}
	conv, def := rows[4], mustOp(t, "conv2d")
	g, err := buildGraph(def, conv.Case, shapesOf(def.inputs(conv.Shape)))
	if err != nil {
		t.Fatal(err)
	}
	n := g.Nodes[len(g.Nodes)-1]
	geom, err := graph.ConvDims(n, []graph.Type{n.Inputs[0].Type, n.Inputs[1].Type})
	if err != nil {
		t.Fatal(err)
	}
	if conv.Flops != 2*float64(geom.MACs()) || geom.Out != [2]int{9, 7} {
		t.Errorf("conv2d: %g flops, output %v; the graph says %d MACs", conv.Flops, geom.Out, geom.MACs())
	}
	if conv.RefCheck.Elements != 2*6*9*7 {
		t.Errorf("conv2d: the reference check compared %d elements, want 2 images' %d", conv.RefCheck.Elements, 2*6*9*7)
	}
	// The FFTs are judged as memory-bound rows (a %COPY cell), conv2d by its flops.
	best, _ := CopyGBps(rows)
	var table bytes.Buffer
	PrintTable(&table, Meta{Device: dev, Oracle: "ref", Opt: Options{Reps: 4}}, rows)
	for _, r := range rows[2:] {
		fft := strings.HasPrefix(r.Op, "fft_")
		if memoryBound(r) != fft || best == 0 {
			t.Errorf("%s: memory-bound %v, copy bandwidth %g", r.Case, memoryBound(r), best)
		}
		cell := fmt.Sprintf("  %.0f%%  ", 100*r.GBps()/best)
		if line := tableLine(table.String(), r.Case); fft != strings.Contains(line, cell) {
			t.Errorf("%s: %%COPY cell %q present %v in %q", r.Case, cell, !fft, line)
		}
	}

	eng := newFake(t, 1)
	eng.corrupt = true
	rows, _, err = Run(eng, RefOracle{MS: 1}, cases[2:], Options{Reps: 2, Seed: 26, RefRows: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Check.Pass || r.RefCheck.Pass || r.Timed() {
			t.Errorf("%s: a corrupted engine output passed (%s)", r.Case, r.Verdict())
		}
	}
	ro, err := RowOps()
	if err != nil {
		t.Fatal(err)
	}
	for op, row := range map[string]string{"fft": "fft_c2c", "rfft": "fft_r2c", "conv2d": "conv2d"} {
		if !strings.Contains(strings.Join(ro[op], ","), row) {
			t.Errorf("op %s is in rows %v, want %s", op, ro[op], row)
		}
	}
}

func mustOp(t *testing.T, name string) opDef {
	t.Helper()
	o, ok := opByName(name)
	if !ok {
		t.Fatalf("no bench op %s", name)
	}
	return o
}

// tableLine is the table's line of case c.
func tableLine(table string, c Case) string {
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == c.Op && f[1] == c.DType.String() && f[2] == ShapeString(c.Shape) {
			return line
		}
	}
	return ""
}
