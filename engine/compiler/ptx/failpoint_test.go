//go:build failpoints

package ptx

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx/ptxas"
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The GPU faults must change the generated code (the GPU golden specs and suites/sanitizer
// then catch them on the GPU machine; docs/mutations.md records that run). Each code-generator
// fault is checked on a kernel of the path it lives in: the SIMT faults on an elementwise
// kernel (the fast lowerings step aside while one is on), the fast reduction's on a row sum.
func TestGPUFaultsChangeTheGeneratedPTX(t *testing.T) {
	defer failpoint.Activate() //nolint:errcheck // switching everything off
	exp := kernelOf(t, "exp", nil, 5, 7)
	sum := kernelOf(t, "reduce_sum", graph.Attrs{"axes": graph.Ints(1)}, 3, 1031)
	for _, name := range failpoint.GPUNames() {
		if !strings.HasPrefix(name, "ptx/") {
			continue // a backend fault (cuda/...): it leaves the generator alone
		}
		k := exp
		if fastPathFaults[name] {
			k = sum
		}
		if err := failpoint.Activate(); err != nil {
			t.Fatal(err)
		}
		clean := generated(t, k)
		if err := failpoint.Activate(name); err != nil {
			t.Fatal(err)
		}
		faulty := generated(t, k)
		if faulty.PTX == clean.PTX {
			t.Errorf("%s does not change the PTX", name)
		}
		if fastPathFaults[name] && faulty.Path != clean.Path {
			t.Errorf("%s moves the kernel from %s to %s: the fault would never run", name, clean.Path, faulty.Path)
		}
	}
	if err := failpoint.Activate(); err != nil {
		t.Fatal(err)
	}
	if m := generated(t, exp); m.Path != "simt-stream" {
		t.Errorf("exp 5x7 with every fault off takes %s, want simt-stream", m.Path)
	}
}

// The store one past the end adds exactly one predicated store per tile store, guarded by the
// last index of the output (35 elements: index 34) and aimed one element further; the PTX
// still assembles.
func TestStoreOnePastEndWritesOneElementPastTheOutput(t *testing.T) {
	defer failpoint.Activate() //nolint:errcheck // switching everything off
	k := kernelOf(t, "exp", nil, 5, 7)
	if err := failpoint.Activate(failpoint.PTXLoadBarrierDropped); err != nil { // the SIMT path, no extra store
		t.Fatal(err)
	}
	clean := generated(t, k)
	if err := failpoint.Activate(failpoint.PTXLoadBarrierDropped, failpoint.PTXStoreOnePastEnd); err != nil {
		t.Fatal(err)
	}
	faulty := generated(t, k)
	if clean.Path != "simt" || faulty.Path != "simt" {
		t.Fatalf("paths %s / %s, want simt for both", clean.Path, faulty.Path)
	}
	stores := func(m *Module) int { return strings.Count(m.PTX, "st.global.b32") }
	if got, want := stores(faulty), 2*stores(clean); got != want || stores(clean) == 0 {
		t.Errorf("f32 global stores: %d with the fault, %d without; want twice as many", got, stores(clean))
	}
	if !regexp.MustCompile(`setp\.eq\.s64\s+%p\d+, %rd\d+, 34;`).MatchString(faulty.PTX) {
		t.Error("no guard on the output's last index (34) in the faulty PTX")
	}
	if !regexp.MustCompile(`add\.s64\s+%rd\d+, %rd\d+, 1;`).MatchString(faulty.PTX) {
		t.Error("no offset one past the last index in the faulty PTX")
	}
	assembles(t, faulty)
}

// The dropped combine barrier removes exactly one bar.sync from the fast reduction and keeps
// the shared-memory stores and loads it separated; the PTX still assembles (ptxas does not
// check barriers, which is why only racecheck can see the fault).
func TestReduceBarrierDroppedRemovesTheFoldCombineBarrier(t *testing.T) {
	defer failpoint.Activate() //nolint:errcheck // switching everything off
	k := kernelOf(t, "reduce_sum", graph.Attrs{"axes": graph.Ints(1)}, 3, 1031)
	if err := failpoint.Activate(); err != nil {
		t.Fatal(err)
	}
	clean := generated(t, k)
	if err := failpoint.Activate(failpoint.PTXReduceBarrierDropped); err != nil {
		t.Fatal(err)
	}
	faulty := generated(t, k)
	if clean.Path != "simt-reduce" || faulty.Path != "simt-reduce" {
		t.Fatalf("paths %s / %s, want simt-reduce for both", clean.Path, faulty.Path)
	}
	bars := func(m *Module) int { return strings.Count(m.PTX, "bar.sync") }
	if bars(faulty) != bars(clean)-1 {
		t.Errorf("bar.sync: %d with the fault, %d without; want one fewer", bars(faulty), bars(clean))
	}
	// Between the last shared store and the first shared load of the combine there is no
	// barrier any more; in the clean kernel there is.
	between := func(m *Module) string {
		st := strings.LastIndex(m.PTX[:strings.Index(m.PTX, "ld.shared.f64")], "st.shared.f64")
		if st < 0 {
			t.Fatalf("no st.shared.f64 before the first ld.shared.f64:\n%s", m.PTX)
		}
		return m.PTX[st:strings.Index(m.PTX, "ld.shared.f64")]
	}
	if !strings.Contains(between(clean), "bar.sync") {
		t.Error("the clean kernel has no barrier between its partials' stores and loads")
	}
	if strings.Contains(between(faulty), "bar.sync") {
		t.Error("the faulty kernel still has a barrier between its partials' stores and loads")
	}
	assembles(t, faulty)
}

func kernelOf(t *testing.T, op string, attrs graph.Attrs, shape ...int) *tile.Kernel {
	t.Helper()
	b := graph.NewBuilder("g")
	b.Output(b.Op(op, attrs, b.Input("x", numerics.F32, shape...)))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Kernels[0]
}

func generated(t *testing.T, k *tile.Kernel) *Module {
	t.Helper()
	m, err := Generate(k, H100)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// assembles runs ptxas on the module where ci/setup.d/60-ptxas.sh installed one.
func assembles(t *testing.T, m *Module) {
	t.Helper()
	tool, err := ptxas.Find()
	if err != nil {
		t.Logf("ptxas not checked: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := tool.Assemble(ctx, m.PTX, m.Entry)
	if err != nil {
		t.Errorf("ptxas: %v", err)
		return
	}
	t.Logf("ptxas %s accepts %s: %s", tool.Release, m.Entry, res)
}

// The row lowering's planted faults change the Tile IR, so the fast row kernels (built for
// the correct kernel by the same builder, tile.Rows) must refuse it and leave the faulty
// kernel to the SIMT path, where the GPU specs see the fault. A dropped eps is a constant the
// fast kernel reads off the Tile IR, so it may take the fast path and compute eps = 0 too.
func TestRowFaultsLeaveTheFastPath(t *testing.T) {
	defer failpoint.Activate() //nolint:errcheck // switching everything off
	for _, c := range []struct {
		op, fault string
		fast      bool
	}{
		{"softmax", failpoint.SoftmaxMaxInitZero, false},
		{"layernorm", failpoint.LayernormPaddingInVariance, false},
		{"layernorm", failpoint.LayernormEpsDropped, true},
	} {
		b := graph.NewBuilder("g")
		x := b.Input("x", numerics.F32, 6, 300)
		if c.op == "layernorm" {
			b.Output(b.Op(c.op, nil, x, b.Input("g", numerics.F32, 300), b.Input("b", numerics.F32, 300)))
		} else {
			b.Output(b.Op(c.op, nil, x))
		}
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		for _, on := range []bool{false, true} {
			names := []string{}
			if on {
				names = append(names, c.fault)
			}
			if err := failpoint.Activate(names...); err != nil {
				t.Fatal(err)
			}
			p, err := compiler.Compile(g, compiler.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := matchRows(p.Kernels[0]) != nil
			if want := !on || c.fast; got != want {
				t.Errorf("%s with %s on=%v: fast row kernel %v, want %v", c.op, c.fault, on, got, want)
			}
		}
	}
}
