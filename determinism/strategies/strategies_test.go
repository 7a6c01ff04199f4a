package strategies

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/dist"
)

// A few rows of the table: one rank against itself is bit for bit; every strategy is within
// PyTorch's pipeline-test tolerance of one rank and repeats its own bits; the table prints.
func TestTableRows(t *testing.T) {
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := Table(context.Background(), "mlp", b, []dist.Mode{dist.Deterministic, dist.Exact},
		[]Strategy{{}, {Mesh: "dp=2"}, {Mesh: "dp=2,tp=2"}, {Mesh: "dp=2,pp=2", Schedule: "1f1b", Micro: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 8 {
		t.Fatalf("%d rows, want 8", len(rows))
	}
	for _, r := range rows {
		if r.Strategy == "1 rank" && (!r.LossBits || !r.GradBits || r.GradDiff != 0) {
			t.Errorf("one rank against one rank: %+v", r)
		}
		if !r.Repeat || r.GradDiff > 4e-5 || r.LossDiff > 4e-5 {
			t.Errorf("%+v: want repeatable bits and differences within 4e-5", r)
		}
	}
	var buf bytes.Buffer
	Write(&buf, rows)
	if n := strings.Count(buf.String(), "\n"); n != 10 {
		t.Errorf("table of %d lines:\n%s", n, buf.String())
	}
	t.Log("\n" + buf.String())
}
