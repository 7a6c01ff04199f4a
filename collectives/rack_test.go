package collectives

import (
	"context"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/fabric"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// TestRackWorldsExact: exact-mode all_reduce on in-process worlds of 128 and 256 ranks sums
// one global set of contributions (SplitFor(256) of them, every rank holding at least one)
// to the same bits on both worlds, and every row agrees with the float64 reference.
func TestRackWorldsExact(t *testing.T) {
	m := Matrix{Ops: []Op{AllReduce}, RedOps: []dist.RedOp{dist.Sum}, DTypes: []numerics.DType{numerics.F32, numerics.BF16}, Counts: []int{67}}
	var rows []Row
	for _, n := range []int{128, 256} {
		t0 := time.Now()
		r, err := RunInproc(context.Background(), n, Config{Cases: m.Cases(n), Mode: dist.Exact, Seed: 1, Split: SplitFor(256)})
		if err != nil {
			t.Fatalf("world %d: %v", n, err)
		}
		t.Logf("world %d: %s", n, time.Since(t0).Round(time.Millisecond))
		rows = append(rows, r...)
	}
	for _, r := range rows {
		if !r.Passed() || r.SplitDigest == "" {
			t.Fatalf("%s world %d: %s (split %q)", r.Key(), r.World, r.Note, r.SplitDigest)
		}
	}
	cases, bad := SplitAgreement(rows)
	if cases != 2 || len(bad) > 0 {
		t.Fatalf("split agreement over 128 and 256 ranks: %d cases, %v", cases, bad)
	}
}

// TestFabricRows: a world of 16 over nodes=2x8 in virtual time: all_reduce takes the
// hierarchical route, every row has the flat route's bits, and the measured times are
// within the model's stated error (the checks Run adds).
func TestFabricRows(t *testing.T) {
	tp, err := fabric.Parse("nodes=2x8")
	if err != nil {
		t.Fatal(err)
	}
	m := Matrix{Ops: []Op{AllReduce, AllGather}, RedOps: []dist.RedOp{dist.Sum, dist.Avg}, DTypes: []numerics.DType{numerics.F32, numerics.BF16},
		Counts: []int{7, 1021}, Sizes: []int64{64 << 10}}
	out, err := Run(context.Background(), Options{Matrix: m, Transport: "inproc", Worlds: []int{16}, Iters: 2, Warmup: 1, Seed: 1,
		Fabric: &Fabric{Topology: tp}})
	if err != nil {
		t.Fatal(err)
	}
	hier := 0
	for _, r := range out.Report.Rows {
		if r.Algo == "hier" {
			hier++
		}
		if r.FlatBits == nil || !*r.FlatBits || r.PredUS <= 0 {
			t.Errorf("%s: flat bits %v, predicted %.1f us", r.Key(), r.FlatBits, r.PredUS)
		}
	}
	if hier != 12 {
		t.Errorf("%d rows on the hierarchical route, want the 12 all_reduce rows", hier)
	}
	if len(out.Report.Checks) < 2 || !out.Report.Passed {
		t.Fatalf("checks %+v", out.Report.Checks)
	}
	// A world the topology does not hold is E_INPUT before anything runs.
	if _, err := Run(context.Background(), Options{Matrix: m, Transport: "inproc", Worlds: []int{8}, Fabric: &Fabric{Topology: tp}}); err == nil {
		t.Fatal("world 8 on nodes=2x8 ran")
	}
}
