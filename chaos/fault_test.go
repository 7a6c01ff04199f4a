package chaos

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

func TestCatalogue(t *testing.T) {
	names := Names()
	if len(names) < 12 {
		t.Fatalf("%d kinds, want at least 12", len(names))
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] || !strings.Contains(n, "/") {
			t.Errorf("kind %q repeated or not hierarchical", n)
		}
		seen[n] = true
		f, err := NewFault(n)
		if err != nil || f.Name() != n {
			t.Errorf("NewFault(%q) = %v, %v", n, f, err)
		}
	}
	if _, err := NewFault("rank/explode"); errs.CodeOf(err) != errs.Input {
		t.Errorf("unknown kind: %v", err)
	}
	// On this CPU machine, with tcp ranks and root: at least 12 kinds act; the device and
	// container kinds say why not.
	run := Run{Transport: "tcp", World: 3, CommTimeout: time.Second, Backend: "cpu", Root: true, CheckEvery: 10}
	n := 0
	for _, f := range Catalogue() {
		err := f.Available(run)
		if err == nil {
			n++
		} else if errs.CodeOf(err) != errs.Unsupported && errs.CodeOf(err) != errs.NoDevice {
			t.Errorf("%s: %v", f.Name(), err)
		}
	}
	if n < 12 {
		t.Errorf("%d kinds available to a tcp run on the CPU, want >= 12", n)
	}
	if err := (&IllegalAddress{}).Available(run); err == nil || !strings.Contains(err.Error(), "cpu backend") {
		t.Errorf("device/illegal-address on the cpu backend: %v", err)
	}
	inproc := run
	inproc.Transport = "inproc"
	if err := (&Kill{}).Available(inproc); errs.CodeOf(err) != errs.Unsupported {
		t.Errorf("rank/kill on goroutine ranks: %v", err)
	}
}

func TestInjectionJSONRoundTrip(t *testing.T) {
	to := 2
	in := []Injection{
		{ID: "f0", Fault: &Hang{For: Duration(1500 * time.Millisecond)}, Rank: 1, Step: 9},
		{ID: "f1", Fault: &Drop{Frames: 2, To: &to}, Rank: 0, Step: 3},
		{ID: "f2", Fault: &Partition{Side: []int{0, 2}}, Rank: 0, Step: 4},
		{ID: "f3", Fault: &Kill{}, Rank: 2, Step: 5},
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"for":"1.5s"`) || strings.Contains(string(b), `"params":{}`) {
		t.Errorf("JSON %s", b)
	}
	var out []Injection
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(out)
	if string(b2) != string(b) {
		t.Errorf("round trip\n%s\n%s", b, b2)
	}
	if err := json.Unmarshal([]byte(`[{"id":"x","fault":"net/teleport"}]`), &out); err == nil {
		t.Error("an unknown fault decoded")
	}
}

func TestRandomScenarioIsSeeded(t *testing.T) {
	run := Run{Transport: "tcp", Backend: "cpu", Root: true}
	a, err := RandomScenario(Scenario{World: 4}, 7, run, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := RandomScenario(Scenario{World: 4}, 7, run, nil)
	c, _ := RandomScenario(Scenario{World: 4}, 8, run, nil)
	if string(a.MarshalIndent()) != string(b.MarshalIndent()) {
		t.Error("the same seed gave two scenarios")
	}
	if string(a.MarshalIndent()) == string(c.MarshalIndent()) {
		t.Error("two seeds gave the same scenario")
	}
	// Over many seeds: every available kind is drawn, steps leave room for what each needs.
	seen := map[string]bool{}
	for s := range uint64(300) {
		sc, err := RandomScenario(Scenario{World: 3}, s, run, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(sc.Faults) < 1 || len(sc.Faults) > 3 || sc.Name != "random-"+itoa(int(s)) {
			t.Fatalf("seed %d: %s", s, sc.MarshalIndent())
		}
		for _, in := range sc.Faults {
			seen[in.Fault.Name()] = true
			if _, ok := in.Fault.(checkpointFault); ok && in.Step < 2*sc.CheckpointEvery {
				t.Errorf("seed %d: %s before a checkpoint to fall back to", s, in)
			}
			if in.Fault.Available(sc.Run(true)) != nil {
				t.Errorf("seed %d: drew %s, which cannot act here", s, in)
			}
		}
	}
	if len(seen) < 12 {
		t.Errorf("300 seeds drew only %d kinds: %v", len(seen), seen)
	}
	only, _ := RandomScenario(Scenario{World: 3}, 1, run, []string{"net/drop"})
	for _, in := range only.Faults {
		if in.Fault.Name() != "net/drop" {
			t.Errorf("--faults net/drop drew %s", in)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestNormalizeRefusesBadScenarios(t *testing.T) {
	for _, sc := range []Scenario{
		{Workload: "train:resnet"},
		{World: -1},
		{Transport: "carrier-pigeon"},
		{Steps: 10, CheckpointEvery: 10},
		{Faults: []Injection{{Fault: &Kill{}, Rank: 5, Step: 3}}},
		{Faults: []Injection{{Fault: &Kill{}, Rank: 0, Step: 60}}},
	} {
		if err := sc.Normalize(); errs.CodeOf(err) != errs.Input {
			t.Errorf("%+v: %v", sc, err)
		}
	}
	sc := Scenario{World: 3, Workload: "train:transformer-block"}
	if err := sc.Normalize(); err != nil || sc.Dims().Batch%3 != 0 {
		t.Errorf("transformer over 3 ranks: %v, batch %d", err, sc.Dims().Batch)
	}
}

// tapTarget drives a fault's Inject in a test: the rank's tap, nothing else.
type tapTarget struct {
	tap  *Tap
	self int
	run  Run
}

func (t *tapTarget) Rank() int                { return t.self }
func (t *tapTarget) Self() int                { return t.self }
func (t *tapTarget) World() int               { return t.run.World }
func (t *tapTarget) Run() Run                 { return t.run }
func (t *tapTarget) Signal(int, Signal) error { return nil }
func (t *tapTarget) Tap() *Tap                { return t.tap }
func (t *tapTarget) CheckpointDir() string    { return "" }
func (t *tapTarget) LastStep() int            { return 0 }
func (t *tapTarget) LastCheckpoint() int      { return 0 }
func (t *tapTarget) Store() StoreControl      { return nil }
func (t *tapTarget) Nodes() NodeControl       { return nil }
func (t *tapTarget) Fabric() FabricControl    { return nil }

// allReduce runs one f32 all_reduce (avg) of world goroutine ranks, rank `on` with the fault
// armed on its tap first; it returns every rank's error and result.
func allReduce(t *testing.T, world, on int, f Fault) ([]error, [][]float32) {
	t.Helper()
	ts := dist.NewInproc(world)
	run := Run{Transport: "inproc", World: world, CommTimeout: 500 * time.Millisecond}
	taps := make([]*Tap, world)
	comms := make([]*dist.Comm, world)
	for r := range world {
		taps[r] = NewTap("")
		comms[r] = dist.NewComm(taps[r].Wrap(ts[r]), dist.Options{Mode: dist.Deterministic, Timeout: run.CommTimeout})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	injected := make(chan struct{})
	go func() {
		defer close(injected)
		f.Inject(ctx, &tapTarget{tap: taps[on], self: on, run: run})
	}()
	for taps[on].armed() == 0 {
		time.Sleep(time.Millisecond)
	}
	errsOut := make([]error, world)
	res := make([][]float32, world)
	var wg sync.WaitGroup
	for r := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := make([]byte, 4*64)
			for i := range 64 {
				binary.LittleEndian.PutUint32(in[4*i:], math.Float32bits(float32(r+i)))
			}
			out := make([]byte, len(in))
			errsOut[r] = comms[r].AllReduce(context.Background(), numerics.F32, in, out, dist.Avg)
			if errsOut[r] != nil {
				ts[r].Close()
			}
			for i := range 64 {
				res[r] = append(res[r], math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:])))
			}
		}()
	}
	wg.Wait()
	cancel()
	<-injected
	return errsOut, res
}

func codesOf(es []error) []errs.Code {
	var out []errs.Code
	for _, e := range es {
		out = append(out, errs.CodeOf(e))
	}
	return out
}

// Each net fault on real frames is caught by the receiving communicator with its code, and
// no rank returns a wrong sum.
func TestNetFaultsAreDetected(t *testing.T) {
	for _, tc := range []struct {
		f    Fault
		want []errs.Code
	}{
		{&Corrupt{}, []errs.Code{errs.Desync}},
		{&Duplicate{}, []errs.Code{errs.Desync, errs.TimeoutComm}},
		{&Drop{}, []errs.Code{errs.TimeoutComm, errs.Desync}},
		{&Delay{By: Duration(2 * time.Second)}, []errs.Code{errs.TimeoutComm}},
		{&Partition{}, []errs.Code{errs.TimeoutComm, errs.Desync}},
	} {
		t.Run(tc.f.Name(), func(t *testing.T) {
			es, _ := allReduce(t, 3, 1, tc.f)
			got := codesOf(es)
			detected := false
			for _, c := range got {
				if c != "" && !slices.Contains(tc.want, c) {
					t.Errorf("codes %v, want only %v", got, tc.want)
				}
				detected = detected || c != ""
			}
			if !detected {
				t.Errorf("no rank detected %s: %v", tc.f.Name(), got)
			}
		})
	}
}

func TestShortDelayIsTolerated(t *testing.T) {
	es, res := allReduce(t, 3, 1, &Delay{By: Duration(50 * time.Millisecond)})
	for r, e := range es {
		if e != nil {
			t.Fatalf("rank %d: %v", r, e)
		}
		if res[r][0] != 1 { // avg of 0, 1, 2
			t.Errorf("rank %d: %v", r, res[r][0])
		}
	}
	if (&Delay{By: Duration(50 * time.Millisecond)}).Expect(Run{CommTimeout: time.Second}).Detect != nil {
		t.Error("a short delay expects a detection")
	}
}

// device/nan keeps the wire valid: the sum arrives, with a NaN in it (the guard's job).
// The NaN lands in the first element of whichever of rank 2's frames goes out first (to rank 0
// or rank 1: the order of its sends is not fixed), so exactly one element is NaN, the same one
// on every rank, and every other element is the right average (1 + i).
func TestNaNReachesTheSumWithAValidChecksum(t *testing.T) {
	es, res := allReduce(t, 3, 2, &NaN{})
	where := -1
	for r, e := range es {
		if e != nil {
			t.Fatalf("rank %d: %v", r, e)
		}
		var nans []int
		for i, v := range res[r] {
			switch {
			case math.IsNaN(float64(v)):
				nans = append(nans, i)
			case v != float32(1+i):
				t.Errorf("rank %d element %d: %v, want %v", r, i, v, 1+i)
			}
		}
		if len(nans) != 1 || (where >= 0 && nans[0] != where) {
			t.Fatalf("rank %d: NaN at %v (rank 0 had it at %d); want exactly one, the same on every rank", r, nans, where)
		}
		where = nans[0]
	}
}

func TestDiskFillStopsAtTheEnd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	dir := t.TempDir()
	if err := mountTmpfs(dir, "1m"); err != nil {
		t.Skip("cannot mount a tmpfs here: ", err)
	}
	defer unmount(dir)
	n, err := fill(filepath.Join(dir, FillName))
	if err != nil || n < 900<<10 {
		t.Fatalf("filled %d: %v", n, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x"), make([]byte, 8192), 0o644); err == nil {
		t.Error("a write after fill succeeded")
	}
}

func TestScenarioMeshSetsAndChecksTheWorld(t *testing.T) {
	sc := &Scenario{Mesh: "dp=2, tp=2", Workload: "train:transformer-block", Steps: 10, CheckpointEvery: 5}
	if err := sc.Normalize(); err != nil || sc.World != 4 || sc.Mesh != "dp=2,tp=2" {
		t.Fatalf("world %d mesh %q: %v", sc.World, sc.Mesh, err)
	}
	bad := &Scenario{Mesh: "dp=2,tp=2", World: 3, Steps: 10, CheckpointEvery: 5}
	if err := bad.Normalize(); errs.CodeOf(err) != errs.Input {
		t.Errorf("world 3 on a 4-rank mesh: %v", err)
	}
	if err := (&Scenario{Mesh: "tp=", Steps: 10, CheckpointEvery: 5}).Normalize(); errs.CodeOf(err) != errs.Parse {
		t.Errorf("a malformed mesh: %v", err)
	}
}
