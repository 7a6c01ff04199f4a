package golden_test

// The planted-bug proof: take a golden case whose tiles are ragged, compile it, then break the
// compiled Tile IR the way a buggy lowering would, run it on the CPU backend and require the
// golden comparison to fail, while the program as compiled passes. If a mutation here ever
// passes, the golden suite could not catch that class of compiler bug.

import (
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/harness"
)

// rewrite replaces every instruction of body (For bodies included) for which f reports a
// change, and returns how many it changed. For is a value whose Body shares its backing array,
// so rewriting in place reaches the kernel.
func rewrite(body []tile.Instr, f func(tile.Instr) (tile.Instr, bool)) int {
	n := 0
	for i, in := range body {
		if loop, ok := in.(tile.For); ok {
			n += rewrite(loop.Body, f)
			continue
		}
		if out, changed := f(in); changed {
			body[i] = out
			n++
		}
	}
	return n
}

// mutateKernels applies f to every kernel of p.
func mutateKernels(p *compiler.Program, f func(tile.Instr) (tile.Instr, bool)) int {
	n := 0
	for _, k := range p.Kernels {
		n += rewrite(k.Body, f)
	}
	return n
}

// dropMasks turns off the boundary mask of loads (and stores, when stores is set): the ragged
// last tile then reads past the end of its row or buffer and writes past the end of its row.
func dropMasks(stores bool) func(tile.Instr) (tile.Instr, bool) {
	return func(in tile.Instr) (tile.Instr, bool) {
		switch x := in.(type) {
		case tile.Load:
			if x.At.Mask {
				x.At.Mask = false
				return x, true
			}
		case tile.Store:
			if stores && x.At.Mask {
				x.At.Mask = false
				return x, true
			}
		}
		return in, false
	}
}

// accumulateIn changes every f32 tile matmul accumulator to dt, as a lowering that took the
// storage dtype for the accumulator would.
func accumulateIn(dt numerics.DType) func(tile.Instr) (tile.Instr, bool) {
	return func(in tile.Instr) (tile.Instr, bool) {
		if x, ok := in.(tile.MMA); ok && x.AccDType == numerics.F32 {
			x.AccDType = dt
			return x, true
		}
		return in, false
	}
}

func TestPlantedTilingBugsAreCaught(t *testing.T) {
	cpu, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		op     string
		dt     numerics.DType
		spec   string
		mutate func(tile.Instr) (tile.Instr, bool)
	}{
		// (a) The boundary mask of the K, M and N edges: 67 = 64+3 rows, K 97 = 3*32+1, N 45 < 64.
		{"matmul boundary masks dropped", "matmul", numerics.F32, "matmul/f32/67x45x97", dropMasks(true)},
		{"matmul load masks dropped, tile hint", "matmul", numerics.BF16, "matmul/bf16/37x29x53-tb-tile16x16x8", dropMasks(false)},
		// (b) The accumulator: K = 97 bf16 additions lose far more than the f32/f16 budgets allow,
		// and at bf16 storage still fail where the sum cancels (the ATol term is small).
		{"matmul accumulator f32 to bf16", "matmul", numerics.F32, "matmul/f32/67x45x97", accumulateIn(numerics.BF16)},
		{"matmul accumulator f32 to bf16, f16 storage", "matmul", numerics.F16, "matmul/f16/67x45x97", accumulateIn(numerics.BF16)},
		{"matmul accumulator f32 to bf16, bf16 storage", "matmul", numerics.BF16, "matmul/bf16/67x45x97", accumulateIn(numerics.BF16)},
		{"batch_matmul accumulator f32 to f16", "batch_matmul", numerics.F32, "batch_matmul/f32/2x65x7x33", accumulateIn(numerics.F16)},
		// (c) Row kernels: 1031 = 4*256 + 7, so the fifth column tile is ragged.
		{"reduce_sum load mask dropped", "reduce_sum", numerics.F32, "reduce_sum/f32/3x1031-axis1", dropMasks(false)},
		{"softmax load mask dropped", "softmax", numerics.F32, "softmax/f32/3x1031", dropMasks(false)},
		{"layernorm load mask dropped", "layernorm", numerics.BF16, "layernorm/bf16/3x1031", dropMasks(false)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := goldenCase(t, tc.op, tc.dt, tc.spec)
			prog, err := compiler.Compile(c.Graph, compiler.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if r := golden.CheckProgram(c, prog, cpu); r.Verdict != harness.VerdictPass {
				t.Fatalf("the unmutated program must pass first: %s: %s", r.Verdict, r.Reason)
			}
			if n := mutateKernels(prog, tc.mutate); n == 0 {
				t.Fatalf("the mutation found nothing to change in %s", tc.spec)
			}
			r := golden.CheckProgram(c, prog, cpu)
			if r.Verdict != harness.VerdictFail {
				t.Fatalf("planted bug not caught: verdict %s (%s)", r.Verdict, r.Reason)
			}
			t.Logf("caught: %s", r.Reason)
		})
	}
}

func goldenCase(t *testing.T, op string, dt numerics.DType, name string) golden.GoldenCase {
	t.Helper()
	f, err := golden.Load(golden.Data(), op, dt)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Cases {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no golden case %s in %s", name, f.Path)
	return golden.GoldenCase{}
}
