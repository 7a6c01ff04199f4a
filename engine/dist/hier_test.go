package dist

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// hierInput is rank r's buffer: seeded values with a few special ones every rank shares at
// the same places (-0 everywhere at 0, an infinity at 2, NaN at 3 on one rank), so the sign of
// a zero sum, infinities and NaN canonicalisation go through both routes.
func hierInput(dt numerics.DType, count, r int) []byte {
	b := randTensor(dt, count, uint64(1000+r)).Data
	sz := dt.Size()
	if dt.IsFloat() && count > 3 {
		store(b, 0, sz, numerics.Encode(dt, math.Copysign(0, -1)))
		store(b, 2, sz, numerics.Encode(dt, math.Inf(1)))
		if r == 1 {
			store(b, 3, sz, numerics.Encode(dt, math.NaN()))
		}
	}
	return b
}

// TestHierMatchesFlat: the hierarchical route gives the flat algorithm's bits, out of place
// and in place, for every dtype, sum and avg, several node shapes and counts (one count
// spans several chain segments).
func TestHierMatchesFlat(t *testing.T) {
	ctx := context.Background()
	type shape struct{ n, node int }
	shapes := []shape{{4, 2}, {8, 4}, {12, 3}, {16, 8}}
	dts := []numerics.DType{numerics.F32, numerics.BF16, numerics.F16, numerics.F64, numerics.I32, numerics.I8, numerics.F8E4M3}
	for _, mode := range []Mode{Deterministic, Fast} {
		for _, sh := range shapes {
			for _, dt := range dts {
				for _, red := range []RedOp{Sum, Avg} {
					for _, count := range []int{0, 1, 7, 1021} {
						checkHier(t, ctx, mode, sh.n, sh.node, dt, red, count)
					}
				}
			}
		}
	}
	// Two chain segments and a ragged third on each chunk.
	per := segmentBytes / 4
	checkHier(t, ctx, Deterministic, 4, 2, numerics.F32, Sum, 2*(2*per+5))
}

func checkHier(t *testing.T, ctx context.Context, mode Mode, n, node int, dt numerics.DType, red RedOp, count int) {
	t.Helper()
	name := fmt.Sprintf("%s n=%d node=%d %s %s count=%d", mode, n, node, dt, red, count)
	flat := make([][]byte, n)
	hier := make([][]byte, n)
	inPlace := make([][]byte, n)
	noErr(t, world(t, n, Options{Mode: mode}, nil, func(c *Comm) error {
		r := c.Rank()
		if !c.UsesHier(red, node) {
			return fmt.Errorf("%s: UsesHier is false", name)
		}
		in := hierInput(dt, count, r)
		flat[r] = make([]byte, len(in))
		if err := c.AllReduce(ctx, dt, in, flat[r], red); err != nil {
			return err
		}
		hier[r] = make([]byte, len(in))
		if err := c.AllReduceHier(ctx, dt, in, hier[r], red, node); err != nil {
			return err
		}
		inPlace[r] = bytes.Clone(in)
		return c.AllReduceHier(ctx, dt, inPlace[r], inPlace[r], red, node)
	}))
	for r := range n {
		if mode == Deterministic && !bytes.Equal(flat[r], hier[r]) {
			t.Fatalf("%s: rank %d: hierarchical bits differ from the flat algorithm's", name, r)
		}
		if !bytes.Equal(hier[r], inPlace[r]) || !bytes.Equal(hier[r], hier[0]) {
			t.Fatalf("%s: rank %d: in-place or cross-rank bits differ", name, r)
		}
	}
}

// TestHierFallsBack: the shapes and modes that take the flat route.
func TestHierFallsBack(t *testing.T) {
	ts := NewInproc(8)
	c := NewComm(ts[0], Options{})
	for _, tc := range []struct {
		node int
		red  RedOp
	}{{1, Sum}, {8, Sum}, {3, Sum}, {4, Max}, {4, Min}} {
		if c.UsesHier(tc.red, tc.node) {
			t.Errorf("node %d %s: want the flat route", tc.node, tc.red)
		}
	}
	if NewComm(ts[1], Options{Mode: Exact}).UsesHier(Sum, 4) {
		t.Error("exact mode: want the flat route")
	}
	if !c.UsesHier(Avg, 4) {
		t.Error("node 4 of 8, avg: want the hierarchical route")
	}
}

// TestHierMismatchedNodes: ranks that disagree on the node size fail, none hangs.
func TestHierMismatchedNodes(t *testing.T) {
	ctx := context.Background()
	es := world(t, 8, Options{Timeout: 2 * time.Second}, nil, func(c *Comm) error {
		node := 4
		if c.Rank() == 5 {
			node = 2
		}
		b := make([]byte, 4*64)
		return c.AllReduceHier(ctx, numerics.F32, b, b, Sum, node)
	})
	failed := 0
	for _, e := range es {
		if e != nil {
			failed++
			if c := errs.CodeOf(e); c != errs.Desync && c != errs.TimeoutComm {
				t.Fatalf("want E_DESYNC or E_TIMEOUT_COMM, got %v", e)
			}
		}
	}
	if failed == 0 {
		t.Fatal("mismatched node sizes passed")
	}
}
