package fabric

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// runWorld runs fn on every rank of an in-process world wrapped by fab and returns each
// rank's error.
func runWorld(fab *Fabric, opts dist.Options, fn func(c *dist.Comm) error) []error {
	n := fab.Topology().World
	ts := dist.NewInproc(n)
	out := make([]error, n)
	var wg sync.WaitGroup
	for r := range ts {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			defer ts[r].Close()
			out[r] = fn(dist.NewComm(fab.Wrap(ts[r]), opts))
		}(r)
	}
	wg.Wait()
	return out
}

func mustTopo(t *testing.T, spec string, n int) *Topology {
	t.Helper()
	tp, err := Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	if tp, err = tp.For(n); err != nil {
		t.Fatal(err)
	}
	return tp
}

// measure is one op's virtual time on fab: the slowest rank's clock advance over the call,
// after a barrier; it also returns rank 0's output.
func measure(t *testing.T, fab *Fabric, op string, count, hier int) (time.Duration, []byte) {
	t.Helper()
	n := fab.Topology().World
	if op == "all_to_all" {
		count = count / n * n
	}
	ctx := context.Background()
	times := make([]time.Duration, n)
	var out []byte
	es := runWorld(fab, dist.Options{}, func(c *dist.Comm) error {
		r := c.Rank()
		send := make([]byte, 4*count)
		for i := range send {
			send[i] = byte(i*7 + r)
		}
		recv := make([]byte, 4*count)
		sendRS := send
		if op == "all_gather" || op == "reduce_scatter" {
			per := count / n
			recv = make([]byte, 4*per*n)
			if op == "all_gather" {
				send = send[:4*per]
			} else {
				sendRS, recv = send[:4*per*n], recv[:4*per]
			}
		}
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		now := c.Transport().(interface{ Now() time.Duration })
		t0 := now.Now()
		var err error
		switch op {
		case "all_reduce":
			err = c.AllReduceHier(ctx, numerics.F32, send, recv, dist.Sum, hier)
		case "all_gather":
			err = c.AllGather(ctx, numerics.F32, send, recv)
		case "reduce_scatter":
			err = c.ReduceScatter(ctx, numerics.F32, sendRS, recv, dist.Sum)
		case "broadcast":
			err = c.Broadcast(ctx, numerics.F32, send, recv, 0)
		case "all_to_all":
			err = c.AllToAll(ctx, numerics.F32, send, recv)
		}
		times[r] = now.Now() - t0
		if r == 0 {
			out = recv
		}
		return err
	})
	for r, e := range es {
		if e != nil {
			t.Fatalf("%s rank %d: %v", op, r, e)
		}
	}
	return max0(times), out
}

func max0(ts []time.Duration) time.Duration {
	var m time.Duration
	for _, x := range ts {
		m = max(m, x)
	}
	return m
}

// TestPredictedVsMeasured: in virtual time every op's measured time is within the model's
// stated error of Predict's closed form, on node, NVL72 and rack topologies, flat and
// hierarchical, latency- and bandwidth-bound sizes.
func TestPredictedVsMeasured(t *testing.T) {
	type tc struct {
		spec  string
		n     int
		count int
	}
	cases := []tc{{"nodes=4x4", 16, 16}, {"nodes=4x4", 16, 1 << 19}, {"nodes=8x8", 64, 1 << 16},
		{"nvl72", 72, 1 << 14}, {"racks=2x2x4", 16, 1 << 18}, {"nodes=2x8,net-bw=5G,jitter=2us", 16, 1 << 18}}
	for _, c := range cases {
		topo := mustTopo(t, c.spec, c.n)
		ops := []string{"all_reduce", "all_reduce/hier", "all_gather", "reduce_scatter", "broadcast", "all_to_all"}
		if c.n > 16 {
			ops = ops[:3] // the large worlds: the all_reduce routes and one direct phase, to keep CI cheap
		}
		for _, op := range ops {
			hier := 0
			name := op
			if op == "all_reduce/hier" {
				if hier = topo.HierNode(c.n); hier == 0 {
					continue
				}
				op = "all_reduce"
			}
			// With jitter, a pipelined all_reduce's virtual time depends on the goroutines'
			// order: a port takes frames first come, first booked, so a later-issued frame
			// booked early can push earlier ones back (measured with one seed: flat all_reduce
			// on nodes=2x8,jitter=2us within 0.8% in 18 of 20 runs, +4.6%, +4.8% and +41% in the
			// others). The median of five judges the model, not that order.
			reps := 1
			if strings.Contains(c.spec, "jitter") {
				reps = 5
			}
			var runs []time.Duration
			for seed := range reps {
				d, _ := measure(t, New(topo, true, uint64(1+seed)), op, c.count, hier)
				runs = append(runs, d)
			}
			slices.Sort(runs)
			got := runs[len(runs)/2]
			want := topo.Predict(op, 4, 4, c.count, hier)
			t.Logf("%-28s %-16s count %8d: measured %10s predicted %10s (%+.1f%%)", c.spec, name, c.count, got, want, 100*(float64(got)/float64(want)-1))
			if !Within(got, want) {
				t.Errorf("%s %s count %d: measured %s, predicted %s: outside the stated %.0f%% + %s", c.spec, name, c.count, got, want, 100*ErrorBound, AbsSlack)
			}
		}
	}
}

// TestHierIsFasterAcrossNodes: on 2 nodes of 8 behind a network 180x slower than NVLink the
// hierarchical route beats the flat one at 4 MiB (the point of it: 1/8 of the buffer crosses
// the network, not half), with the same bits.
func TestHierIsFasterAcrossNodes(t *testing.T) {
	topo := mustTopo(t, "nodes=2x8,net-bw=5G", 16)
	count := 1 << 20
	flat, fb := measure(t, New(topo, true, 1), "all_reduce", count, 0)
	hier, hb := measure(t, New(topo, true, 1), "all_reduce", count, 8)
	t.Logf("flat %s hier %s", flat, hier)
	if 2*hier >= flat {
		t.Errorf("hierarchical %s is not faster than flat %s", hier, flat)
	}
	if !bytes.Equal(fb, hb) {
		t.Error("hierarchical bits differ from flat")
	}
}

// TestCorruptNICDetected: a NIC that flips a bit of every 3rd frame is caught by the frame
// checks (E_DESYNC), never becomes data.
func TestCorruptNICDetected(t *testing.T) {
	topo := mustTopo(t, "nodes=2x4", 8)
	fab := New(topo, true, 1)
	if err := fab.SetFaults([]Fault{{Kind: Corrupt, A: 5, Every: 3}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	es := runWorld(fab, dist.Options{Timeout: 2 * time.Second}, func(c *dist.Comm) error {
		b := make([]byte, 4*1024)
		for i := range 4 {
			if err := c.AllReduce(ctx, numerics.F32, b, b, dist.Sum); err != nil {
				return fmt.Errorf("call %d: %w", i, err)
			}
		}
		return nil
	})
	desync := 0
	for _, e := range es {
		if errs.CodeOf(e) == errs.Desync {
			desync++
		}
	}
	if desync == 0 || fab.Stats().Corrupted == 0 {
		t.Fatalf("corruption not detected as E_DESYNC: %v (corrupted %d)", es, fab.Stats().Corrupted)
	}
}

// TestSlowFaultsCost: a slow link, a congested switch and a flapping link each make an
// all_reduce measurably slower in virtual time than the healthy fabric, with the same bits.
func TestSlowFaultsCost(t *testing.T) {
	topo := mustTopo(t, "nodes=4x4", 16)
	count := 1 << 16
	base, bb := measure(t, New(topo, true, 1), "all_reduce", count, 0)
	for _, f := range []Fault{{Kind: Slow, A: 1, B: 9, Factor: 10}, {Kind: Congest, A: 2, Factor: 4},
		{Kind: Flap, A: 0, B: 5, Period: 200 * time.Microsecond, Down: 150 * time.Microsecond}} {
		fab := New(topo, true, 1)
		if err := fab.SetFaults([]Fault{f}); err != nil {
			t.Fatal(err)
		}
		got, gb := measure(t, fab, "all_reduce", count, 0)
		t.Logf("%s: %s vs healthy %s", f, got, base)
		if float64(got) < 1.3*float64(base) {
			t.Errorf("%s: %s is not slower than the healthy %s", f, got, base)
		}
		if !bytes.Equal(bb, gb) {
			t.Errorf("%s: bits changed", f)
		}
	}
}

func TestParse(t *testing.T) {
	for spec, want := range map[string][3]int{"nodes=16x8": {128, 8, 0}, "nvl72": {0, 72, 0}, "nvl72x2": {144, 72, 1}, "racks=2x4x8": {64, 8, 4},
		"nodes=8x8,net-bw=25G,net-lat=3us,jitter=1us": {64, 8, 0}} {
		tp, err := Parse(spec)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if got := [3]int{tp.World, tp.NodeSize, tp.Nodes}; got != want {
			t.Errorf("%s: %v, want %v", spec, got, want)
		}
	}
	tp, _ := Parse("racks=2x4x8,net-bw=25G")
	if tp.Class(0, 7) != Local || tp.Class(0, 8) != Net || tp.Class(0, 32) != Spine || tp.Links[Net].Bandwidth != 25e9 {
		t.Errorf("classes or overrides wrong: %s", tp)
	}
	for _, bad := range []string{"", "nodes=16", "nodes=0x8", "mesh=4", "nodes=2x2,net-bw=fast", "nodes=2x2,loss=1", "nodes=2x2,foo=1", "nodes=2x2,nvl-lat"} {
		if _, err := Parse(bad); errs.CodeOf(err) != errs.Input {
			t.Errorf("%q: want E_INPUT, got %v", bad, err)
		}
	}
	if _, err := mustTopoErr("nodes=16x8", 64); errs.CodeOf(err) != errs.Input {
		t.Errorf("a world that does not fit the topology: want E_INPUT, got %v", err)
	}
}

func mustTopoErr(spec string, n int) (*Topology, error) {
	tp, err := Parse(spec)
	if err != nil {
		return nil, err
	}
	return tp.For(n)
}

// TestRealTimeThrottles: in real time the sender is held for the modeled cost: an all_reduce
// over a 3 ms network takes at least the model's time on the wall clock (and not wildly more).
func TestRealTimeThrottles(t *testing.T) {
	topo := mustTopo(t, "nodes=2x2,net-lat=3ms,nvl-lat=1ms", 4)
	fab := New(topo, false, 1)
	want := topo.Predict("all_reduce", 4, 4, 64, 0)
	ctx := context.Background()
	t0 := time.Now()
	noErrs(t, runWorld(fab, dist.Options{}, func(c *dist.Comm) error {
		b := make([]byte, 4*64)
		return c.AllReduce(ctx, numerics.F32, b, b, dist.Sum)
	}))
	got := time.Since(t0)
	t.Logf("real time %s, predicted %s", got, want)
	if got < want*9/10 || got > 20*want {
		t.Fatalf("real time %s, predicted %s", got, want)
	}
}

func noErrs(t *testing.T, es []error) {
	t.Helper()
	for r, e := range es {
		if e != nil {
			t.Fatalf("rank %d: %v", r, e)
		}
	}
}

// TestWaitedOnNamesTheSlowLink: in virtual time, every rank's per-peer wait (dist.Comm.WaitedOn,
// on the fabric's clock) is longest on the two ends of a slow link: they end the first
// all_reduce at least one slowed latency late (each waits for the other's contribution over
// it), so their contributions to the second come that late to everyone, where a healthy
// peer's come within a few healthy latencies.
func TestWaitedOnNamesTheSlowLink(t *testing.T) {
	topo := mustTopo(t, "nodes=2x4", 8)
	const factor = 40
	fab := New(topo, true, 1)
	if err := fab.SetFaults([]Fault{{Kind: Slow, A: 1, B: 6, Factor: factor}}); err != nil {
		t.Fatal(err)
	}
	on := make([][]time.Duration, 8)
	noErrs(t, runWorld(fab, dist.Options{}, func(c *dist.Comm) error {
		b := make([]byte, 4*256)
		for range 2 {
			if err := c.AllReduce(context.Background(), numerics.F32, b, b, dist.Sum); err != nil {
				return err
			}
		}
		on[c.Rank()] = c.WaitedOn()
		return nil
	}))
	slowLat := factor * topo.Links[Net].Latency
	for r, w := range on {
		for p, d := range w {
			switch {
			case p == r:
				if d != 0 {
					t.Errorf("rank %d waited %s on itself", r, d)
				}
			case (p == 1 || p == 6) && r != 1 && r != 6:
				if d < slowLat-topo.Links[Net].Latency { // less the observer's own lag in the first call
					t.Errorf("rank %d waited %s on rank %d, an end of the slow link: want about its latency %s", r, d, p, slowLat)
				}
			case p != 1 && p != 6:
				if d > slowLat/4 {
					t.Errorf("rank %d waited %s on the healthy rank %d (the slow link's latency is %s)", r, d, p, slowLat)
				}
			}
		}
	}
	t.Logf("rank 0 waited %v", on[0])
}
