package coverage

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// The CI spec: every op of the registry has every cell filled, or a stated reason, and no
// reason is stale.
func TestEveryOpHasEveryCellOrAStatedReason(t *testing.T) {
	src := Registries()
	rows := Matrix(src)
	if len(rows) != len(src.Ops) || len(rows) < 40 {
		t.Fatalf("%d rows for %d ops", len(rows), len(src.Ops))
	}
	for _, g := range Gaps(rows) {
		t.Errorf("%s (cover it, or add a line to coverage/reasons.go saying why not)", g)
	}
	for _, s := range StaleReasons(src, rows) {
		t.Errorf("coverage/reasons.go: %s", s)
	}
	for _, r := range rows {
		if len(r.Cells) != len(Checks) {
			t.Fatalf("%s: %d cells", r.Op, len(r.Cells))
		}
	}
}

// The cells come from the registries: ops known to be covered read yes, and a fake op that
// no registry knows is reported in every column.
func TestAnOpWithoutCellsIsReported(t *testing.T) {
	src := Registries()
	fake := &graph.OpDef{Name: "zz_fake_op", Kind: graph.KindUnary, MinArgs: 1, MaxArgs: 1, DTypes: []numerics.DType{numerics.F32}}
	relu, _ := graph.Lookup("relu")
	src.Ops = []*graph.OpDef{relu, fake}
	src.Reasons = nil
	rows := Matrix(src)
	for _, c := range rows[0].Cells {
		if c.Check != Bench && c.State != Yes { // relu's bench cell has a kind reason, removed here
			t.Errorf("relu x %s: %s %s", c.Check, c.State, c.Detail)
		}
	}
	gaps := map[string]bool{}
	for _, g := range Gaps(rows) {
		if g.Op == fake.Name {
			gaps[g.Check] = true
		}
	}
	// The shard pass rules by kind, so a unary op is sharded by the unary rule, and says so.
	if c := rows[1].Cells[6]; c.Check != Shard || c.State != Yes || !strings.Contains(c.Detail, "unary rule") {
		t.Errorf("fake op x shard: %+v", c)
	}
	for _, c := range Checks {
		if c != VJP && c != Shard && !gaps[c] {
			t.Errorf("fake op x %s: not reported as a gap", c)
		}
	}
	if !gaps[VJP] {
		t.Error("an op with neither Grad nor NoGrad must be a vjp gap")
	}
	// One reason line fills the cell; a line about an op that does not exist is stale.
	src.Reasons = []Reason{{fake.Name, Bench, "a test op"}, {"no_such_op", Bench, "x"}}
	rows = Matrix(src)
	if c := rows[1].Cells[len(Checks)-1]; c.State != Stated || c.Detail != "a test op" {
		t.Errorf("bench cell with a reason: %+v", c)
	}
	stale := strings.Join(StaleReasons(src, rows), "\n")
	if !strings.Contains(stale, "no_such_op") || strings.Contains(stale, fake.Name) {
		t.Errorf("stale reasons:\n%s", stale)
	}
}
