package checkpoint

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// localBarrier is a reusable barrier for goroutine ranks that gives up when ctx ends (after
// which it is broken for good, which is fine in a test).
type localBarrier struct {
	mu    sync.Mutex
	world int
	n     int
	ch    chan struct{}
}

func newBarrier(world int) *localBarrier {
	return &localBarrier{world: world, ch: make(chan struct{})}
}

func (b *localBarrier) Wait(ctx context.Context) error {
	b.mu.Lock()
	ch := b.ch
	if b.n++; b.n == b.world {
		b.n = 0
		b.ch = make(chan struct{})
		b.mu.Unlock()
		close(ch)
		return nil
	}
	b.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// randomBits fills a tensor of dt with random bit patterns, including NaN payloads, -0 and
// infinities; bool gets 0 or 1.
func randomBits(r *rand.Rand, dt numerics.DType, shape []int) *tensor.Tensor {
	t := tensor.New(dt, shape)
	for i := range t.Data {
		t.Data[i] = byte(r.Uint32())
	}
	if dt == numerics.Bool {
		for i := range t.Data {
			t.Data[i] &= 1
		}
	}
	return t
}

// testState is a deterministic State for (seed, step, rank): every dtype, a scalar, an empty
// tensor and one bigger tensor of about elems elements.
func testState(seed uint64, step, rank, elems int) State {
	r := rand.New(rand.NewPCG(seed, uint64(step)<<16|uint64(rank)))
	st := State{Step: step, Tensors: map[string]*tensor.Tensor{},
		RNG:  []uint64{r.Uint64(), r.Uint64(), 0, ^uint64(0)},
		Meta: map[string]string{"model": "mlp", "rank": fmt.Sprint(rank), "unicode": "µ\u00e9\n\"q\""}}
	for _, dt := range numerics.All {
		st.Tensors["param/"+dt.String()] = randomBits(r, dt, []int{3, 5})
		st.Tensors["adam/m/"+dt.String()] = randomBits(r, dt, []int{7})
	}
	st.Tensors["scalar"] = randomBits(r, numerics.F32, []int{})
	st.Tensors["empty"] = randomBits(r, numerics.BF16, []int{0, 4})
	st.Tensors["big"] = randomBits(r, numerics.F32, []int{elems})
	return st
}

// fataler is what testing.TB and *rapid.T share.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// sameState fails t unless got equals want bit for bit.
func sameState(t fataler, what string, want, got State) {
	t.Helper()
	if got.Step != want.Step {
		t.Fatalf("%s: step %d, want %d", what, got.Step, want.Step)
	}
	if !slices.Equal(got.RNG, want.RNG) {
		t.Fatalf("%s: RNG %v, want %v", what, got.RNG, want.RNG)
	}
	if !maps.Equal(got.Meta, want.Meta) {
		t.Fatalf("%s: Meta %v, want %v", what, got.Meta, want.Meta)
	}
	if !slices.Equal(slices.Sorted(maps.Keys(got.Tensors)), slices.Sorted(maps.Keys(want.Tensors))) {
		t.Fatalf("%s: tensors %v, want %v", what, slices.Sorted(maps.Keys(got.Tensors)), slices.Sorted(maps.Keys(want.Tensors)))
	}
	for name, w := range want.Tensors {
		g := got.Tensors[name]
		if g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("%s: tensor %q is %s (digest %.12s), want %s (digest %.12s)", what, name,
				g.TypeString(), g.Digest(), w.TypeString(), w.Digest())
		}
	}
}

// saveWorld saves states[r] on goroutine rank r and returns each rank's error.
func saveWorld(t testing.TB, dir string, keep int, states []State) []error {
	t.Helper()
	world := len(states)
	b := newBarrier(world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &Writer{Dir: dir, Rank: r, World: world, Layout: "replicated", Keep: keep,
				Barrier: b.Wait, Timeout: 20 * time.Second}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			errs[r] = w.Save(ctx, states[r])
		}()
	}
	wg.Wait()
	return errs
}

// mustSaveWorld saves one step of a world whose rank r holds testState(seed, step, r, elems).
func mustSaveWorld(t testing.TB, dir string, keep int, seed uint64, step, world, elems int) []State {
	t.Helper()
	states := make([]State, world)
	for r := range states {
		states[r] = testState(seed, step, r, elems)
	}
	for r, err := range saveWorld(t, dir, keep, states) {
		if err != nil {
			t.Fatalf("save step %d world %d: rank %d: %v", step, world, r, err)
		}
	}
	return states
}

// mustLoad loads the latest checkpoint on every rank and checks step and bits.
func mustLoad(t testing.TB, dir string, want []State) []*Loaded {
	t.Helper()
	out := make([]*Loaded, len(want))
	for r := range want {
		l, err := LoadLatest(dir, r, len(want))
		if err != nil {
			t.Fatalf("LoadLatest rank %d: %v", r, err)
		}
		if l == nil {
			t.Fatalf("LoadLatest rank %d: no checkpoint, want step %d", r, want[r].Step)
		}
		sameState(t, fmt.Sprintf("rank %d", r), want[r], l.State)
		out[r] = l
	}
	return out
}

// dotNames lists every path under dir whose name starts with "." (temporary files, trash).
func dotNames(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir && strings.HasPrefix(d.Name(), ".") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
