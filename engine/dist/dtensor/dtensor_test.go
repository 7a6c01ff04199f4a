package dtensor

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// onRanks runs fn on every rank of m as goroutines over an in-process transport.
func onRanks(t *testing.T, m *mesh.Mesh, fn func(g *Groups) error) {
	t.Helper()
	ts := dist.NewInproc(m.World())
	errs := make([]error, m.World())
	var wg sync.WaitGroup
	for r := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := NewGroups(m, dist.NewComm(ts[r], dist.Options{}))
			if err == nil {
				err = fn(g)
			}
			errs[r] = err
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

func mustMesh(t *testing.T, s string) *mesh.Mesh {
	m, err := mesh.ParseMesh(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustLayout(t *testing.T, s string, rank int) mesh.Layout {
	l, err := mesh.ParseLayout(s, rank)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func random(shape []int, seed uint64) *tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 1))
	v := make([]float64, tensor.NumElems(shape))
	for i := range v {
		v[i] = r.NormFloat64()
	}
	return tensor.FromFloat64(numerics.F32, shape, v)
}

func TestAReplicatedOneSummedOverAFourDeviceDPMeshIsFour(t *testing.T) {
	m := mustMesh(t, "dp=4")
	got := make([]*tensor.Tensor, 4)
	onRanks(t, m, func(g *Groups) error {
		// Every rank holds [1.0]; read as addends of a sum over dp, the tensor is their sum.
		x, err := New(m, "x", mustLayout(t, "P(dp)", 1), []int{1}, tensor.FromFloat64(numerics.F32, []int{1}, []float64{1}))
		if err != nil {
			return err
		}
		y, err := x.Redistribute(context.Background(), g, mesh.Replicated(1))
		if err == nil {
			got[g.Rank()] = y.Local
		}
		return err
	})
	for r, y := range got {
		if v := y.Float64(0); v != 4 {
			t.Fatalf("rank %d: %v, want 4", r, v)
		}
	}
}

func TestRedistributionBetweenAnyTwoLayoutsKeepsEveryBit(t *testing.T) {
	m := mustMesh(t, "dp=2,tp=2")
	global := random([]int{4, 8}, 7)
	layouts := []string{"R", "[S(dp),R]", "[R,S(tp)]", "[S(tp),R]", "[S(dp),S(tp)]", "[S(tp),S(dp)]", "[R,S(dp)]", "[S(dp),R]+P(tp)", "P(dp,tp)"}
	for _, from := range layouts {
		for _, to := range layouts {
			if strings.Contains(to, "P(") {
				continue // a pending sum cannot be created
			}
			lf, lt := mustLayout(t, from, 2), mustLayout(t, to, 2)
			blocks := make([]*tensor.Tensor, m.World())
			onRanks(t, m, func(g *Groups) error {
				x, err := FromGlobal(m, "x", lf, global, g.Rank())
				if err != nil {
					return err
				}
				y, err := x.Redistribute(context.Background(), g, lt)
				if err == nil {
					blocks[g.Rank()] = y.Local
				}
				return err
			})
			back, err := Assemble(m, "x", lt, blocks)
			if err != nil {
				t.Fatalf("%s -> %s: %v", from, to, err)
			}
			if !bytes.Equal(back.Data, global.Data) {
				t.Fatalf("%s -> %s changed the tensor", from, to)
			}
		}
	}
}

func TestAssembleSumsAddendsAndRejectsReplicasThatDisagree(t *testing.T) {
	m := mustMesh(t, "dp=2,tp=2")
	global := random([]int{4, 4}, 3)
	l := mustLayout(t, "[S(dp),R]+P(tp)", 2)
	blocks := make([]*tensor.Tensor, 4)
	for r := range blocks {
		var err error
		if blocks[r], err = Shard(m, "x", l, global, r); err != nil {
			t.Fatal(err)
		}
	}
	back, err := Assemble(m, "x", l, blocks)
	if err != nil || !bytes.Equal(back.Data, global.Data) {
		t.Fatalf("partial assemble: %v", err)
	}
	col := mustLayout(t, "col:tp", 2)
	for r := range blocks {
		blocks[r], _ = Shard(m, "x", col, global, r)
	}
	blocks[3].Data[0] ^= 1 // rank 3 replicates rank 1's block (same tp coordinate)
	if _, err := Assemble(m, "x", col, blocks); errs.CodeOf(err) != errs.Desync || !strings.Contains(err.Error(), "ranks 1 and 3") {
		t.Fatalf("replica mismatch: %v", err)
	}
}

func TestTheEightDeviceColumnShardedWeightHasTheRightBlocks(t *testing.T) {
	m := mustMesh(t, "dp=4,tp=2")
	l := mustLayout(t, "col:tp", 2)
	local, err := m.LocalShape("W", l, []int{8192, 8192})
	if err != nil || local[0] != 8192 || local[1] != 4096 {
		t.Fatalf("local %v %v", local, err)
	}
	if off := m.Offset(l, []int{8192, 8192}, 5); off[0] != 0 || off[1] != 4096 {
		t.Fatalf("rank 5 (dp=2,tp=1) offset %v", off)
	}
	if m.Owners(l) != 4 {
		t.Fatalf("every column block lives on the 4 dp ranks, got %d", m.Owners(l))
	}
}
