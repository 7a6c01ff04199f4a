package sharded

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/harness"
)

func TestEveryCaseCompilesAndTheTensorParallelOnesCommunicate(t *testing.T) {
	cases, err := Cases()
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 3*(3+2+3)+1+3*2 {
		t.Fatalf("%d cases", len(cases))
	}
	for _, c := range cases {
		dp, err := c.Compile()
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if strings.Contains(c.Name, "/tp-row/tp=2") && strings.Join(Collectives(dp), " ") != "all_reduce:tp" {
			t.Fatalf("%s: row-parallel matmul collectives %v", c.Name, Collectives(dp))
		}
	}
}

func TestRunAgreesWithOneDevice(t *testing.T) {
	cases, _ := Cases()
	be, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if c.Name != "mlp/dp-tp/dp=2,tp=2" {
			continue
		}
		o, err := c.Run(be, dist.Deterministic)
		if err != nil {
			t.Fatal(err)
		}
		for i := range o.Whole {
			if r := harness.Check(o.Whole[i], o.Single[i], c.Tolerance(o.Single[i].DType)); !r.Pass {
				t.Fatalf("output %d: %s", i, r.Reason)
			}
		}
		return
	}
	t.Fatal("case mlp/dp-tp/dp=2,tp=2 missing")
}
