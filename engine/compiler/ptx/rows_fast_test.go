package ptx

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/golden"
)

var rowsOpsUnderTest = map[string]rowsOp{"softmax": rowsSoftmax, "log_softmax": rowsLogSoftmax, "layernorm": rowsLayernorm, "rmsnorm": rowsRMSNorm}

// rowsKernel compiles one row op over x of the given dtype and shape (norms over the last axis).
func rowsKernel(t *testing.T, op string, dt numerics.DType, attrs graph.Attrs, shape ...int) *tile.Kernel {
	t.Helper()
	b := graph.NewBuilder("rows")
	x := b.Input("x", dt, shape...)
	ins := []*graph.Value{x}
	if op == "layernorm" || op == "rmsnorm" {
		ins = append(ins, b.Input("g", dt, shape[len(shape)-1]))
		if op == "layernorm" {
			ins = append(ins, b.Input("b", dt, shape[len(shape)-1]))
		}
	}
	b.Output(b.Op(op, attrs, ins...))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Kernels) != 1 {
		t.Fatalf("%s: %d kernels", op, len(p.Kernels))
	}
	return p.Kernels[0]
}

// checkRowsPTX is checkPTX with each packing conversion "cvt.rn.bf16x2.f32 d, a, b" checked
// as the two moves "mov.b32 d, a" and "mov.b32 d, b", which demand the same register files
// (d a 32-bit word, a and b f32), whatever checkPTX's own table says of the x2 form.
func checkRowsPTX(text string, params int) error {
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		ins := strings.TrimSpace(line)
		for _, op := range []string{"cvt.rn.bf16x2.f32 ", "cvt.rn.f16x2.f32 "} {
			if rest, ok := strings.CutPrefix(ins, op); ok {
				ops := strings.Split(strings.TrimSuffix(rest, ";"), ", ")
				if len(ops) != 3 {
					return fmt.Errorf("%q: want 3 operands", ins)
				}
				line = "\tmov.b32 " + ops[0] + ", " + ops[1] + ";\n\tmov.b32 " + ops[0] + ", " + ops[2] + ";\n"
			}
		}
		b.WriteString(line)
	}
	return checkPTX(b.String(), params)
}

// TestRowsMatchCatalogue: every catalogue row kernel with an f32 accumulator over f32, f16 or
// bf16 data takes the fast path (whatever its axis, row count or ragged length), and generates
// PTX the static checker accepts; f64 kernels stay on the SIMT path.
func TestRowsMatchCatalogue(t *testing.T) {
	fast := map[string]int{}
	for _, s := range golden.Catalogue() {
		want, ok := rowsOpsUnderTest[s.Op]
		if !ok {
			continue
		}
		p, err := compiler.Compile(s.Graph, compiler.Options{})
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		for _, k := range p.Kernels {
			plan := matchRows(k)
			if s.DType != numerics.F32 && s.DType != numerics.F16 && s.DType != numerics.BF16 {
				if plan != nil {
					t.Errorf("%s: a %s kernel matched the fast path", s.Name, s.DType)
				}
				continue
			}
			if plan == nil || plan.op != want {
				t.Errorf("%s: kernel %s not recognised as %s (plan %+v)", s.Name, k.Name, want, plan)
				continue
			}
			m, err := Generate(k, H100)
			if err != nil {
				t.Fatalf("%s: %v", s.Name, err)
			}
			if m.Path != "simt-rows" || m.Grid != [3]int{plan.rows, 1, 1} || m.Threads%32 != 0 || m.SharedBytes != rowsShared {
				t.Errorf("%s: module path %s grid %v threads %d shared %d", s.Name, m.Path, m.Grid, m.Threads, m.SharedBytes)
			}
			if err := checkRowsPTX(m.PTX, len(k.Params)); err != nil {
				t.Errorf("%s: %v", s.Name, err)
			}
			simt := H100
			simt.SIMTOnly = true
			if m2, err := Generate(k, simt); err != nil || m2.Path != "simt" {
				t.Errorf("%s: SIMTOnly target gave path %v, %v", s.Name, m2, err)
			}
			fast[s.Op]++
		}
	}
	for op := range rowsOpsUnderTest {
		if fast[op] < 6 { // 3 shapes x f32, f16, bf16
			t.Errorf("%s: only %d catalogue kernels took the fast path", op, fast[op])
		}
	}
}

// TestRowsLayout pins the thread layouts of the shapes the bench measures and of a ragged row.
func TestRowsLayout(t *testing.T) {
	cases := []struct {
		op      string
		dt      numerics.DType
		shape   []int
		T, K, W int
	}{
		{"softmax", numerics.F32, []int{8192, 8192}, 512, 4, 4},
		{"softmax", numerics.BF16, []int{8192, 8192}, 512, 2, 8},
		{"layernorm", numerics.BF16, []int{64, 8192}, 512, 2, 8},
		{"rmsnorm", numerics.F32, []int{4, 16384}, 1024, 4, 4},
		{"log_softmax", numerics.F32, []int{3, 1031}, 96, 11, 1}, // 1031 is odd: scalar slots
		{"softmax", numerics.F16, []int{1, 7}, 32, 1, 1},
		{"softmax", numerics.BF16, []int{2, 1030}, 96, 6, 2}, // even: 4-byte slots
	}
	for _, c := range cases {
		k := rowsKernel(t, c.op, c.dt, nil, c.shape...)
		p := matchRows(k)
		if p == nil {
			t.Fatalf("%s %s %v: not matched", c.op, c.dt, c.shape)
		}
		g := newRowsGen(k, p, H100)
		if g == nil || g.T != c.T || g.K != c.K || g.W != c.W {
			t.Errorf("%s %s %v: layout %+v, want T=%d K=%d W=%d", c.op, c.dt, c.shape, g, c.T, c.K, c.W)
			continue
		}
		m := g.module()
		if err := checkRowsPTX(m.PTX, len(k.Params)); err != nil {
			t.Errorf("%s %s %v: %v", c.op, c.dt, c.shape, err)
		}
		if c.W*c.dt.Size() == 16 && !strings.Contains(m.PTX, "ld.global.v4.b32") {
			t.Errorf("%s %s %v: no 16-byte loads", c.op, c.dt, c.shape)
		}
	}
	// Rows too long for registers stay on the SIMT path.
	if m, err := Generate(rowsKernel(t, "softmax", numerics.F32, nil, 2, 40000), H100); err != nil || m.Path != "simt" {
		t.Errorf("a 40000-long row: path %v, %v", m, err)
	}
}

// TestRowsRefusesOtherKernels: only the exact canonical kernel is taken; any change leaves
// the kernel to the SIMT path, which runs whatever Tile IR it is given.
func TestRowsRefusesOtherKernels(t *testing.T) {
	base := func() *tile.Kernel { return rowsKernel(t, "layernorm", numerics.F32, nil, 11, 300) }
	if matchRows(base()) == nil {
		t.Fatal("the canonical layernorm kernel is not matched")
	}
	mutations := map[string]func(k *tile.Kernel){
		"variance mask dropped": func(k *tile.Kernel) {
			f := k.Body[5].(tile.For)
			mc := f.Body[2].(tile.MaskCols)
			mc.ColLimit = math.MaxInt
			f.Body[2] = mc
			k.Body[5] = f
		},
		"a loop short of the row": func(k *tile.Kernel) {
			f := k.Body[1].(tile.For)
			f.Count--
			k.Body[1] = f
			f2 := k.Body[5].(tile.For)
			f2.Count--
			k.Body[5] = f2
			f3 := k.Body[len(k.Body)-1].(tile.For)
			f3.Count--
			k.Body[len(k.Body)-1] = f3
		},
		"f64 accumulation": func(k *tile.Kernel) {
			f := k.Body[1].(tile.For)
			r := f.Body[1].(tile.Reduce)
			r.DType = numerics.F64
			f.Body[1] = r
		},
		"store removed": func(k *tile.Kernel) {
			f := k.Body[len(k.Body)-1].(tile.For)
			f.Body = f.Body[:len(f.Body)-1]
			k.Body[len(k.Body)-1] = f
		},
		"gamma read with a stride": func(k *tile.Kernel) {
			f := k.Body[len(k.Body)-1].(tile.For)
			l := f.Body[3].(tile.Load)
			l.At.ColStrides = []int{2}
			f.Body[3] = l
		},
	}
	for name, mutate := range mutations {
		k := base()
		mutate(k)
		if p := matchRows(k); p != nil {
			t.Errorf("%s: still matched as %s", name, p.op)
		}
	}
	// eps is read off the kernel, not assumed.
	k := rowsKernel(t, "rmsnorm", numerics.F32, graph.Attrs{"eps": graph.Float(0.25)}, 3, 64)
	if p := matchRows(k); p == nil || p.eps != 0.25 || p.count != 64 {
		t.Errorf("rmsnorm eps=0.25: plan %+v", p)
	}
	if p := matchRows(rowsKernel(t, "reduce_sum", numerics.F32, graph.Attrs{"axes": graph.Ints(-1)}, 3, 64)); p != nil {
		t.Errorf("reduce_sum matched as %s", p.op)
	}
}

// TestRowsFastEnvOff: TESSERA_PTX_ROWS=off keeps row kernels on the SIMT path.
func TestRowsFastEnvOff(t *testing.T) {
	t.Setenv(rowsFastEnv, "off")
	if m, err := Generate(rowsKernel(t, "softmax", numerics.F32, nil, 4, 256), H100); err != nil || m.Path != "simt" {
		t.Errorf("with %s=off: path %v, %v", rowsFastEnv, m, err)
	}
}

// TestRowsExpReduction checks the argument split of the fast exp with an exact 2^t standing in
// for ex2.approx: what the split adds must stay within an ulp, so the GPU's error is ex2's
// own (about 2 ulp) plus at most one.
func TestRowsExpReduction(t *testing.T) {
	model := func(d float32) float32 {
		c := max(d, rowsExpClamp)
		tt := c * rowsLog2e
		lo := float32(float64(c)*float64(rowsLog2e) - float64(tt)) // exact: fma(c, L, -t)
		lo2 := float32(float64(c)*float64(rowsLog2eLo) + float64(lo))
		corr := lo2 * rowsLn2
		y := float32(math.Exp2(float64(tt)))
		if y < 0x1p-126 { // ex2.approx.ftz
			y = 0
		}
		return float32(float64(y)*float64(corr) + float64(y))
	}
	worst := 0.0
	for i := 0; i <= 200000; i++ {
		d := float32(-104 * float64(i) / 200000)
		got, want := model(d), math.Exp(float64(d))
		if want < 0x1p-125 { // subnormal results flush to 0: absolute error only
			if math.Abs(float64(got)-want) > 0x1p-125 {
				t.Fatalf("exp(%g) = %g, want %g", d, got, want)
			}
			continue
		}
		ulp := float64(math.Nextafter32(float32(want), 1) - float32(want))
		worst = max(worst, math.Abs(float64(got)-want)/ulp)
	}
	if worst > 1 {
		t.Errorf("argument split error %.3g ulp, want <= 1", worst)
	}
	if got := model(float32(math.Inf(-1))); got != 0 {
		t.Errorf("exp(-Inf) = %g", got)
	}
}
