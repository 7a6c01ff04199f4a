package ptx

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/golden"
)

// catalogueKernels compiles every golden spec and yields its kernels.
func catalogueKernels(t *testing.T, fn func(spec golden.Spec, p *compiler.Program, k *tile.Kernel)) {
	t.Helper()
	for _, s := range golden.Catalogue() {
		p, err := compiler.Compile(s.Graph, compiler.Options{})
		if err != nil {
			t.Fatalf("%s: compile: %v", s.Name, err)
		}
		for _, k := range p.Kernels {
			fn(s, p, k)
		}
	}
}

// TestCatalogueGeneratesWellFormedPTX generates every catalogue kernel on both paths: the
// default (tensor cores for f16/bf16 MMAs) and SIMT only.
func TestCatalogueGeneratesWellFormedPTX(t *testing.T) {
	n, tensor, stream := 0, map[string]bool{}, map[string]bool{}
	simt := H100
	simt.SIMTOnly = true
	catalogueKernels(t, func(s golden.Spec, _ *compiler.Program, k *tile.Kernel) {
		for _, target := range []Target{H100, simt} {
			m, err := Generate(k, target)
			if err != nil {
				t.Errorf("%s kernel %s: %v", s.Name, k.Name, err)
				return
			}
			if err := checkPTX(m.PTX, len(k.Params)+len(m.Extra)); err != nil {
				t.Errorf("%s kernel %s: %v", s.Name, k.Name, err)
			}
			if m.Path == "simt-rows" && !target.SIMTOnly {
				continue // the fast row kernels' launch shapes: rows_fast_test.go
			}
			if m.Path == "simt-transpose" {
				if m.Grid[0] < 1 || m.Grid[1] != 1 || m.Threads != transposeThreads || m.SharedBytes < transposeTile*transposePitch {
					t.Errorf("%s kernel %s: transpose launch shape %v x %d, %d bytes", s.Name, k.Name, m.Grid, m.Threads, m.SharedBytes)
				}
				stream[s.Op] = true
				continue
			}
			if m.Path == "simt-reduce" {
				// Rows of tiles folded at once; the grid from the shape alone.
				if m.Grid[0] < 1 || m.Grid[1] != 1 || m.Threads != reduceThreads || m.SharedBytes < 8 {
					t.Errorf("%s kernel %s: reduce launch shape %v x %d, %d bytes", s.Name, k.Name, m.Grid, m.Threads, m.SharedBytes)
				}
				stream[s.Op] = true
				continue
			}
			if m.Path == "simt-stream" {
				// Grid-stride loops: a grid sized from the SM count, no shared memory.
				if m.Grid[0] < 1 || m.Grid[0] > target.SMs*streamCTAsPerSM || m.Grid[1] != 1 || m.Threads != streamThreads || m.SharedBytes != 0 {
					t.Errorf("%s kernel %s: stream launch shape %v x %d, %d bytes", s.Name, k.Name, m.Grid, m.Threads, m.SharedBytes)
				}
				stream[s.Op] = true
				continue
			}
			wantPath := "simt"
			if !target.SIMTOnly && strings.Contains(m.PTX, "mma.sync") {
				wantPath = "mma.sync"
				tensor[s.Op+"/"+s.DType.String()] = true
			}
			if m.Grid != [3]int{gridTotal(k.Grid), 1, 1} || m.Threads != simtThreads || m.SharedBytes < 16 || m.Path != wantPath {
				t.Errorf("%s kernel %s: launch shape %v x %d, %d bytes, path %s", s.Name, k.Name, m.Grid, m.Threads, m.SharedBytes, m.Path)
			}
			if !strings.Contains(m.PTX, ".visible .entry "+m.Entry+"(") {
				t.Errorf("%s: entry %s not in the text", s.Name, m.Entry)
			}
		}
		n++
	})
	if n < 700 {
		t.Errorf("only %d catalogue kernels generated; the catalogue has 734 specs", n)
	}
	for _, want := range []string{"matmul/bf16", "matmul/f16", "batch_matmul/bf16", "attention/f16", "attention/bf16"} {
		if !tensor[want] {
			t.Errorf("no %s kernel took the tensor-core path (have %v)", want, tensor)
		}
	}
	for _, want := range []string{"add", "exp", "cast", "gelu", "transpose", "slice", "concat", "reshape", "reduce_sum", "reduce_max", "reduce_mean"} {
		if !stream[want] {
			t.Errorf("no %s kernel took the stream or reduce path", want)
		}
	}
	for op := range tensor {
		if !strings.HasSuffix(op, "f16") {
			t.Errorf("%s took the tensor-core path: only f16/bf16 operands may", op)
		}
	}
}

// TestCheckerCatchesMistakes proves the checker is not vacuous: each planted defect fails it.
func TestCheckerCatchesMistakes(t *testing.T) {
	t.Setenv(streamEnv, "off") // the plants below are written against the SIMT path's text
	m := unaryModule(t, "relu", numerics.F32, 5, 7)
	if err := checkPTX(m.PTX, 2); err != nil {
		t.Fatalf("good PTX rejected: %v", err)
	}
	planted := map[string]func(string) string{
		"undeclared register": func(s string) string { return strings.Replace(s, "mov.u32 %r1,", "mov.u32 %r99999,", 1) },
		"wrong class": func(s string) string {
			return strings.Replace(s, "cvta.to.global.u64 %rd2", "cvta.to.global.u64 %fd2", 1)
		},
		"unknown opcode":  func(s string) string { return strings.Replace(s, "bar.sync 0", "bar.red 0", 1) },
		"duplicate label": func(s string) string { return strings.Replace(s, "$L2:", "$L1:", 1) },
		"dangling branch": func(s string) string { return strings.Replace(s, "bra $L1;", "bra $L777;", 1) },
		"unbalanced":      func(s string) string { return strings.Replace(s, "}\n", "\n", 1) },
	}
	checkerRefuses(t, m.PTX, 2, planted)
	if checkPTX(m.PTX, 3) == nil {
		t.Errorf("param count mismatch accepted")
	}
}

func TestUnsupportedIsCoded(t *testing.T) {
	k := &tile.Kernel{Name: "bad", Grid: []int{1}, NumRegs: 3, NumVars: 1, Body: []tile.Instr{
		tile.Full{Dst: 0, Rows: 4, Cols: 4, Value: 1},
		tile.Full{Dst: 1, Rows: 4, Cols: 4, Value: 2},
		tile.MMA{Acc: 0, A: 0, B: 1, AccDType: numerics.F32},
	}}
	_, err := Generate(k, H100)
	if errs.CodeOf(err) != errs.Unsupported || !strings.Contains(err.Error(), "kernel bad instr 3") {
		t.Errorf("aliased mma: got %v, want E_UNSUPPORTED naming kernel bad instr 3", err)
	}
	_, err = Generate(&tile.Kernel{Name: "k", Grid: []int{1}, NumVars: 1}, Target{SM: 70, PTXVersion: "8.0"})
	if errs.CodeOf(err) != errs.Unsupported {
		t.Errorf("sm_70: got %v, want E_UNSUPPORTED", err)
	}
	_, err = Generate(&tile.Kernel{Name: "k", Grid: []int{0}}, H100)
	if errs.CodeOf(err) != errs.Input {
		t.Errorf("invalid kernel: got %v, want E_INPUT", err)
	}
}

func TestTextOfExample(t *testing.T) {
	g, err := graph.ParseFile(filepath.Join("..", "..", "..", "docs", "examples", "mlp.tg"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	text, err := Text(p, H100)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(text, ".visible .entry "); got != len(p.Kernels) {
		t.Errorf("%d entries for %d kernels", got, len(p.Kernels))
	}
	if !strings.Contains(text, ".target sm_90\n") || !strings.Contains(text, "mul.rn.f32") {
		t.Errorf("text lacks the target or the f32 MMA:\n%.2000s", text)
	}
}

// TestWritePTX writes every catalogue kernel's PTX to $TESSERA_PTX_OUT, one file per kernel,
// for `ptxas -arch=sm_90` on the GPU machine (see docs/ptx.md). Without the variable it skips.
func TestWritePTX(t *testing.T) {
	dir := os.Getenv("TESSERA_PTX_OUT")
	if dir == "" {
		t.Skip("TESSERA_PTX_OUT not set: nothing to write")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n := 0
	catalogueKernels(t, func(s golden.Spec, _ *compiler.Program, k *tile.Kernel) {
		m, err := Generate(k, H100)
		if err != nil {
			t.Errorf("%s: %v", s.Name, err)
			return
		}
		name := strings.NewReplacer("/", "__", ".", "_").Replace(s.Name) + "." + k.Name + ".ptx"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(m.PTX), 0o644); err != nil {
			t.Fatal(err)
		}
		n++
	})
	t.Logf("wrote %d PTX files to %s", n, dir)
}

// A routine (tanh here, and the bf16 encoder of its f64 result) is one .func however many
// elements the unrolled stream loop applies it to, and the checker holds calls to their
// signatures.
func TestMathRoutinesAreFunctionsWrittenOnce(t *testing.T) {
	m := unaryModule(t, "tanh", numerics.BF16, 64, 64)
	if err := checkPTX(m.PTX, 2); err != nil {
		t.Fatalf("good PTX rejected: %v", err)
	}
	if n := strings.Count(m.PTX, ".func (.reg .f64 %ret) tq_tanh(.reg .f64 %arg)"); n != 1 {
		t.Fatalf("tq_tanh defined %d times", n)
	}
	if n := strings.Count(m.PTX, ", tq_tanh, ("); n < 8 {
		t.Fatalf("%d calls of tq_tanh: the stream loop should apply it to at least 8 elements", n)
	}
	if n := strings.Count(m.PTX, "fma.rn.f64"); n > 60 {
		t.Errorf("%d fma.rn.f64 in the module: the routine's body is repeated", n)
	}
	planted := map[string]func(string) string{
		"call to an undefined routine": func(s string) string { return strings.Replace(s, ", tq_tanh, (", ", tq_tanhx, (", 1) },
		"result in the wrong class":    func(s string) string { return strings.Replace(s, "call (%fd", "call (%rd", 1) },
		"routine defined twice": func(s string) string {
			i := strings.Index(s, ".func (.reg .f64 %ret) tq_tanh")
			j := i + strings.Index(s[i:], "}\n") + 2
			return s[:j] + s[i:j] + s[j:]
		},
		"a routine uses the entry's registers": func(s string) string {
			i := strings.Index(s, ".func (.reg .f64 %ret) tq_tanh")
			return s[:i] + strings.Replace(s[i:], "%arg;", "%fd99999;", 1)
		},
	}
	checkerRefuses(t, m.PTX, 2, planted)
}

// unaryModule is the H100 module of the one kernel of op applied to an input of dt and shape.
func unaryModule(t *testing.T, op string, dt numerics.DType, shape ...int) *Module {
	t.Helper()
	return opModule(t, op, dt, nil, shape...)
}

// opModule is the H100 module of the first kernel of op, with attrs, on an input of dt and shape.
func opModule(t *testing.T, op string, dt numerics.DType, attrs graph.Attrs, shape ...int) *Module {
	t.Helper()
	g := graph.NewBuilder(op)
	g.Output(g.Op(op, attrs, g.Input("x", dt, shape...)))
	gr, err := g.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := compiler.Compile(gr, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Generate(p.Kernels[0], H100)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkerRefuses applies each plant to good PTX and fails t when a plant does not change the
// text or the checker accepts the result.
func checkerRefuses(t *testing.T, good string, params int, planted map[string]func(string) string) {
	t.Helper()
	for name, plant := range planted {
		bad := plant(good)
		if bad == good {
			t.Fatalf("%s: plant did not apply", name)
		}
		if checkPTX(bad, params) == nil {
			t.Errorf("%s: checker accepted it", name)
		}
	}
}
