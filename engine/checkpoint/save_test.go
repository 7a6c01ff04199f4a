package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func TestRoundTripEveryDTypeBitwise(t *testing.T) {
	dir := t.TempDir()
	want := mustSaveWorld(t, dir, 0, 1, 7, 1, 100)
	l := mustLoad(t, dir, want)[0]
	if len(l.Notices) != 0 || l.Manifest.Step != 7 || l.Manifest.World != 1 || l.Manifest.Layout != "replicated" {
		t.Fatalf("notices %q, manifest %+v", l.Notices, l.Manifest)
	}
	// The rank file is an ordinary .npz, 16-bit floats as '<u2' and fp8 as '|u1'.
	arrays, err := tensor.ReadNPZFile(filepath.Join(dir, StepDirName(7), RankFileName(0)))
	if err != nil {
		t.Fatal(err)
	}
	descr := map[string]string{}
	for _, a := range arrays {
		descr[a.Name] = a.Descr
	}
	for _, dt := range numerics.All {
		if got := descr["param/"+dt.String()]; got != tensor.Descr(dt) {
			t.Errorf("%s stored as %q, want %q", dt, got, tensor.Descr(dt))
		}
	}
	if _, ok := descr[metaEntry]; !ok {
		t.Errorf("no %s entry in %v", metaEntry, descr)
	}
	again, err := Load(dir, 7, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, "Load", want[0], again.State)
}

// TestRoundTripProperty: any state of any dtype mix round-trips bit for bit.
func TestRoundTripProperty(t *testing.T) {
	root := t.TempDir()
	i := 0
	rapid.Check(t, func(rt *rapid.T) {
		i++
		dir := filepath.Join(root, fmt.Sprint(i))
		st := State{Step: rapid.IntRange(0, 1<<40).Draw(rt, "step"), Tensors: map[string]*tensor.Tensor{}}
		st.RNG = rapid.SliceOf(rapid.Uint64()).Draw(rt, "rng")
		st.Meta = rapid.MapOf(rapid.String(), rapid.String()).Draw(rt, "meta")
		if len(st.RNG) == 0 {
			st.RNG = nil
		}
		if len(st.Meta) == 0 {
			st.Meta = nil
		}
		n := rapid.IntRange(0, 6).Draw(rt, "tensors")
		for k := range n {
			dt := rapid.SampledFrom(numerics.All).Draw(rt, "dtype")
			shape := rapid.SliceOfN(rapid.IntRange(0, 4), 0, 3).Draw(rt, "shape")
			tn := tensor.New(dt, shape)
			copy(tn.Data, rapid.SliceOfN(rapid.Byte(), len(tn.Data), len(tn.Data)).Draw(rt, "bits"))
			if dt == numerics.Bool {
				for j := range tn.Data {
					tn.Data[j] &= 1
				}
			}
			name := rapid.StringMatching(`[a-z][a-z0-9/._-]{0,12}`).Draw(rt, "name") + fmt.Sprint(k)
			st.Tensors[name] = tn
		}
		w := &Writer{Dir: dir, World: 1}
		if err := w.Save(context.Background(), st); err != nil {
			rt.Fatal(err)
		}
		l, err := LoadLatest(dir, 0, 1)
		if err != nil || l == nil {
			rt.Fatalf("load: %v %v", l, err)
		}
		sameState(rt, "round trip", st, l.State)
	})
}

func TestMultiRankGoroutines(t *testing.T) {
	for _, world := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("world-%d", world), func(t *testing.T) {
			dir := t.TempDir()
			var want []State
			for _, step := range []int{10, 20, 30} {
				want = mustSaveWorld(t, dir, 2, 3, step, world, 1000)
				ls := mustLoad(t, dir, want)
				m := ls[0].Manifest
				if m.Step != step || m.World != world || len(m.Files) != world {
					t.Fatalf("manifest %+v", m)
				}
			}
			infos, err := List(dir)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, in := range infos {
				got = append(got, fmt.Sprintf("%d:%s", in.Step, in.Status))
			}
			if want := []string{"20:committed", "30:committed"}; !slices.Equal(got, want) {
				t.Fatalf("List after Keep 2: %v, want %v", got, want)
			}
			if d := dotNames(t, dir); len(d) != 0 {
				t.Fatalf("leftovers: %v", d)
			}
		})
	}
}

func TestBarrierTimeoutIsCodedAndCommitsNothing(t *testing.T) {
	dir := t.TempDir()
	mustSaveWorld(t, dir, 0, 5, 10, 2, 10)
	// Only rank 0 of 2 saves step 20: its barrier must end at the deadline.
	b := newBarrier(2)
	w := &Writer{Dir: dir, Rank: 0, World: 2, Barrier: b.Wait, Timeout: 200 * time.Millisecond}
	start := time.Now()
	err := w.Save(context.Background(), testState(5, 20, 0, 10))
	if errs.CodeOf(err) != errs.Timeout || !strings.Contains(err.Error(), "checkpoint step 20: rank 0: barrier after checking step-00000020") {
		t.Fatalf("err = %v, want E_TIMEOUT naming step, rank and file", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Save returned after %v", d)
	}
	l, err := LoadLatest(dir, 1, 2)
	if err != nil || l.State.Step != 10 || len(l.Notices) != 0 {
		t.Fatalf("LoadLatest = %+v, %v; want step 10 without notices", l, err)
	}
}

// A Barrier that ignores ctx must not hold Save past the deadline.
func TestBarrierIgnoringContextStillTimesOut(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	w := &Writer{Dir: t.TempDir(), Rank: 1, World: 2, Timeout: 100 * time.Millisecond,
		Barrier: func(context.Context) error { <-block; return nil }}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.Save(ctx, testState(1, 1, 1, 1)); errs.CodeOf(err) != errs.Timeout {
		t.Fatalf("err = %v, want E_TIMEOUT", err)
	}
}

// A rank that fails before the barrier does not leave the others waiting for the deadline.
func TestRankFailureDoesNotHangOthers(t *testing.T) {
	dir := t.TempDir()
	want := mustSaveWorld(t, dir, 0, 6, 10, 2, 10)
	bad := testState(6, 20, 1, 10)
	bad.Tensors["flag"] = &tensor.Tensor{DType: numerics.Bool, Shape: []int{1}, Data: []byte{2}}
	start := time.Now()
	res := saveWorld(t, dir, 0, []State{testState(6, 20, 0, 10), bad})
	if time.Since(start) > 10*time.Second {
		t.Fatalf("took %v", time.Since(start))
	}
	if errs.CodeOf(res[1]) != errs.Input || !strings.Contains(res[1].Error(), "rank 1") {
		t.Fatalf("rank 1: %v, want E_INPUT naming rank 1", res[1])
	}
	if errs.CodeOf(res[0]) != errs.Checkpoint || !strings.Contains(res[0].Error(), "rank 1's rank-1.npz") {
		t.Fatalf("rank 0: %v, want E_CHECKPOINT naming rank 1's file", res[0])
	}
	mustLoad(t, dir, want)
}

func TestSaveRejectsWhatCannotRoundTrip(t *testing.T) {
	w := &Writer{Dir: t.TempDir(), World: 1}
	cases := map[string]State{
		"negative step": {Step: -1},
		"reserved name": {Tensors: map[string]*tensor.Tensor{"__checkpoint__": tensor.New(numerics.F32, []int{1})}},
		"nil tensor":    {Tensors: map[string]*tensor.Tensor{"x": nil}},
		"short data":    {Tensors: map[string]*tensor.Tensor{"x": {DType: numerics.F32, Shape: []int{2}, Data: make([]byte, 7)}}},
		"bad dtype":     {Tensors: map[string]*tensor.Tensor{"x": {DType: 0, Shape: []int{}, Data: nil}}},
	}
	for name, st := range cases {
		if err := w.Save(context.Background(), st); err == nil || errs.CodeOf(err) == errs.Internal {
			t.Errorf("%s: err = %v, want a coded input error", name, err)
		}
	}
	for name, bad := range map[string]*Writer{
		"no dir":     {World: 1},
		"rank>world": {Dir: "x", Rank: 2, World: 2, Barrier: newBarrier(2).Wait},
		"no barrier": {Dir: "x", Rank: 0, World: 2},
	} {
		if err := bad.Save(context.Background(), State{}); errs.CodeOf(err) != errs.Input {
			t.Errorf("%s: err = %v, want E_INPUT", name, err)
		}
	}
}

func TestResaveIntactStepIsRefusedBrokenOneReplaced(t *testing.T) {
	dir := t.TempDir()
	mustSaveWorld(t, dir, 0, 7, 10, 2, 10)
	res := saveWorld(t, dir, 0, []State{testState(8, 10, 0, 10), testState(8, 10, 1, 10)})
	for r, err := range res {
		if errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), "already committed") {
			t.Fatalf("rank %d: %v, want E_INPUT already committed", r, err)
		}
	}
	// Still the first save's bits.
	mustLoad(t, dir, []State{testState(7, 10, 0, 10), testState(7, 10, 1, 10)})
	// Break it: the same step may be saved again.
	flipBit(t, filepath.Join(dir, StepDirName(10), RankFileName(1)), 100)
	want := mustSaveWorld(t, dir, 0, 8, 10, 2, 10)
	mustLoad(t, dir, want)
}

// Garbage of crashed saves is ignored by the loader and removed by the next commit; a pending
// folder newer than the commit is left alone (it may be a later save in progress).
func TestGarbageIgnoredThenCleaned(t *testing.T) {
	dir := t.TempDir()
	mustSaveWorld(t, dir, 0, 9, 10, 2, 10)
	want := mustSaveWorld(t, dir, 0, 9, 30, 2, 10)
	write := func(rel string, data string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("step-00000040/.rank-0.npz.tmp-123", "half")
	write("step-00000040/rank-1.npz", "not an npz")
	write("step-00000040/.manifest.json.tmp-9", "{")
	write("step-00000020/rank-0.npz", "x")
	write("step-00000070/rank-0.npz", "x")
	write(".trash-step-00000005/rank-0.npz", "x")
	write("step-40/manifest.json", "{}") // not a step folder name
	write("notes.txt", "user file")
	l := mustLoad(t, dir, want)
	if len(l[0].Notices) != 0 {
		t.Fatalf("notices for garbage: %q", l[0].Notices)
	}
	infos, _ := List(dir)
	var got []string
	for _, in := range infos {
		got = append(got, fmt.Sprintf("%d:%s", in.Step, in.Status))
	}
	if w := []string{"10:committed", "20:pending", "30:committed", "40:pending", "70:pending"}; !slices.Equal(got, w) {
		t.Fatalf("List = %v, want %v", got, w)
	}
	want = mustSaveWorld(t, dir, 2, 9, 50, 2, 10)
	mustLoad(t, dir, want)
	infos, _ = List(dir)
	got = got[:0]
	for _, in := range infos {
		got = append(got, fmt.Sprintf("%d:%s", in.Step, in.Status))
	}
	if w := []string{"30:committed", "50:committed", "70:pending"}; !slices.Equal(got, w) {
		t.Fatalf("List after save 50 keep 2 = %v, want %v", got, w)
	}
	if d := dotNames(t, dir); len(d) != 0 {
		t.Fatalf("leftovers: %v", d)
	}
	for _, keep := range []string{"notes.txt", "step-40/manifest.json"} {
		if _, err := os.Stat(filepath.Join(dir, keep)); err != nil {
			t.Errorf("cleanup removed %s: %v", keep, err)
		}
	}
}

func TestSaveErrorNamesStepRankFile(t *testing.T) {
	dir := t.TempDir()
	// The step folder's place is taken by a file: writing must fail with a clear message.
	if err := os.WriteFile(filepath.Join(dir, StepDirName(3)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := (&Writer{Dir: dir, World: 1}).Save(context.Background(), testState(1, 3, 0, 1))
	var e *errs.Error
	if !errors.As(err, &e) || !strings.Contains(err.Error(), "checkpoint step 3: rank 0") {
		t.Fatalf("err = %v", err)
	}
}
