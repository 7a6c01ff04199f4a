package training

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// gradsOf gives every rank its own random tensors of the given dtypes and element counts
// (never zeros: a bucket that dropped a tensor must show).
func gradsOf(rank int, dts []numerics.DType, sizes []int) []*tensor.Tensor {
	r := rand.New(rand.NewPCG(uint64(rank)+1, 7))
	out := make([]*tensor.Tensor, len(sizes))
	for i, n := range sizes {
		vals := make([]float64, n)
		for j := range vals {
			vals[j] = r.NormFloat64() * float64(1+i)
		}
		out[i] = tensor.FromFloat64(dts[i], []int{n}, vals)
	}
	return out
}

// averageOn runs average over a world of inproc ranks and returns every rank's tensors.
func averageOn(t *testing.T, world int, dts []numerics.DType, sizes []int, average func(context.Context, *dist.Comm, []*tensor.Tensor) error) [][]*tensor.Tensor {
	t.Helper()
	ts := dist.NewInproc(world)
	out := make([][]*tensor.Tensor, world)
	errsOut := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[r] = gradsOf(r, dts, sizes)
			errsOut[r] = average(context.Background(), dist.NewComm(ts[r], dist.Options{Mode: dist.Deterministic}), out[r])
		}()
	}
	wg.Wait()
	for r, err := range errsOut {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return out
}

// Buckets change how many all_reduces a step makes, never a bit of the average: every tensor,
// in a bucket or alone, on every rank, equals its own one-tensor all_reduce.
func TestBucketedAverageHasTheBitsOfOneAllReducePerTensor(t *testing.T) {
	dts := []numerics.DType{numerics.F32, numerics.F32, numerics.F32, numerics.BF16, numerics.BF16, numerics.F32, numerics.F64}
	sizes := []int{1, 300, 17, 64, 5, 4099, 33}
	const world = 3
	alone := averageOn(t, world, dts, sizes, func(ctx context.Context, c *dist.Comm, ts []*tensor.Tensor) error {
		for _, tt := range ts {
			out := make([]byte, len(tt.Data))
			if err := c.AllReduce(ctx, tt.DType, tt.Data, out, dist.Avg); err != nil {
				return err
			}
			copy(tt.Data, out)
		}
		return nil
	})
	before := gradsOf(0, dts, sizes)
	for _, capBytes := range []int{1, 1300, 20000, compiler.BucketBytes} {
		got := averageOn(t, world, dts, sizes, func(ctx context.Context, c *dist.Comm, ts []*tensor.Tensor) error {
			return averageBuckets(ctx, c, 5*time.Second, ts, capBytes)
		})
		for r := range world {
			for i := range sizes {
				if !bytes.Equal(got[r][i].Data, alone[r][i].Data) {
					t.Fatalf("cap %d: rank %d tensor %d (%s): bucketed average differs from its own all_reduce", capBytes, r, i, got[r][i].TypeString())
				}
			}
		}
	}
	// The average moved every tensor (a no-op average would pass the comparison above).
	for i := range sizes {
		if bytes.Equal(before[i].Data, alone[0][i].Data) {
			t.Fatalf("tensor %d: the average left rank 0's values as they were", i)
		}
	}
}

func TestBucketsKeepOrderDTypeAndCap(t *testing.T) {
	f32 := func(n int) *tensor.Tensor { return tensor.New(numerics.F32, []int{n}) }
	bf := func(n int) *tensor.Tensor { return tensor.New(numerics.BF16, []int{n}) }
	ts := []*tensor.Tensor{f32(10), f32(10), bf(4), bf(4), f32(100), f32(1), f32(1)}
	// 40+40 bytes fit a 96-byte cap; the bf16 pair starts a new bucket (dtype); the 400-byte
	// tensor travels alone (over the cap); the last two f32 go together.
	want := [][]int{{0, 1}, {2, 3}, {4}, {5, 6}}
	got := buckets(ts, 96)
	if len(got) != len(want) {
		t.Fatalf("%d buckets, want %d", len(got), len(want))
	}
	k := 0
	for i, b := range got {
		if len(b) != len(want[i]) {
			t.Fatalf("bucket %d holds %d tensors, want %d", i, len(b), len(want[i]))
		}
		for j, tt := range b {
			if tt != ts[want[i][j]] {
				t.Fatalf("bucket %d slot %d is not tensor %d", i, j, want[i][j])
			}
			k++
		}
	}
	if k != len(ts) {
		t.Fatalf("buckets hold %d tensors, want %d", k, len(ts))
	}
}
