package harness

import (
	"math"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func TestDigests(t *testing.T) {
	a, b := f32(1, 2), f32(1, 3)
	d := Digests([]*tensor.Tensor{a, b, nil})
	if d[0] != a.Digest() || d[1] != b.Digest() || d[2] != NilDigest {
		t.Fatalf("Digests = %v", d)
	}
	ab := CombinedDigest([]*tensor.Tensor{a, b})
	if ab != CombinedDigest([]*tensor.Tensor{a.Clone(), b.Clone()}) {
		t.Error("combined digest is not a function of the bits")
	}
	if ab == CombinedDigest([]*tensor.Tensor{b, a}) {
		t.Error("combined digest ignores order")
	}
	if ab == CombinedDigest([]*tensor.Tensor{a}) || CombinedDigest(nil) == CombinedDigest([]*tensor.Tensor{nil}) {
		t.Error("combined digest ignores the count")
	}
	if CombinedDigest([]*tensor.Tensor{f32(0)}) == CombinedDigest([]*tensor.Tensor{f32(math.Copysign(0, -1))}) {
		t.Error("-0 and +0 must digest differently")
	}
	if len(ab) != 64 {
		t.Errorf("combined digest %q is not hex SHA-256", ab)
	}
}

// The computation key changes with the graph, any input and the schedule, and only with them.
func TestComputationKey(t *testing.T) {
	b := graph.NewBuilder("g")
	b.Output(b.Op("exp", nil, b.Input("x", numerics.F32, 3)))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	b2 := graph.NewBuilder("g")
	b2.Output(b2.Op("tanh", nil, b2.Input("x", numerics.F32, 3)))
	g2, err := b2.Build()
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]string{"x": "aa", "y": "bb"}
	k := ComputationKey(g, in, "s1")
	if k != ComputationKey(g.Clone(), map[string]string{"y": "bb", "x": "aa"}, "s1") || len(k) != 32 {
		t.Errorf("key %q is not a function of the computation alone", k)
	}
	for what, other := range map[string]string{
		"graph":    ComputationKey(g2, in, "s1"),
		"input":    ComputationKey(g, map[string]string{"x": "ab", "y": "bb"}, "s1"),
		"schedule": ComputationKey(g, in, "s2"),
	} {
		if other == k {
			t.Errorf("another %s gives the same key", what)
		}
	}
}
