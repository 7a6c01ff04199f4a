package collectives

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/cudaipc"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// runFakeCuda runs cfg through the device path (RunDeviceRank) over engine/dist/cudaipc's
// real DeviceComm on a fakeNode: n ranks as goroutines, the control plane and the host
// communicator on one inproc transport per rank, as a cuda job has them on one tcp transport.
func runFakeCuda(t *testing.T, n int, cfg Config) ([]Row, *fakeNode, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node := newFakeNode()
	ts := dist.NewInproc(n)
	rows := make([][]Row, n)
	fails := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ts[r].Close()
			dev := node.device(r)
			dc, err := cudaipc.New(ctx, dev, ts[r], cudaipc.Options{Mode: cfg.Mode, Timeout: 30 * time.Second})
			if err != nil {
				fails[r] = err
				return
			}
			d := &DeviceRank{Transport: "cuda", Comm: dc, Mem: dev,
				Host: dist.NewComm(ts[r], dist.Options{ID: hostCommID, Timeout: 30 * time.Second}),
				Alloc: func(ctx context.Context, n int) (uint64, error) {
					b, err := dc.Alloc(ctx, n)
					return b.Ptr, err
				},
				Free: func(ctx context.Context, p uint64, n int) error {
					return dc.Free(ctx, cudaipc.Buffer{Ptr: p, Bytes: n})
				},
			}
			rc := cfg
			if r != 0 {
				rc.Progress = nil
			}
			rows[r], fails[r] = RunDeviceRank(ctx, d, rc)
			if err := dc.Close(ctx); err != nil && fails[r] == nil {
				fails[r] = err
			}
		}()
	}
	wg.Wait()
	if err := firstFailure(fails); err != nil {
		return nil, node, err
	}
	for r := 1; r < n; r++ {
		if len(rows[r]) != len(rows[0]) {
			t.Fatalf("rank %d holds %d rows, rank 0 %d", r, len(rows[r]), len(rows[0]))
		}
	}
	return rows[0], node, nil
}

// deviceMatrix: every op and reduction, dtypes of 1, 2, 4 and 8 bytes (an fp8 sum among
// them), counts zero, one and primes (no world above 1 divides them).
var deviceMatrix = Matrix{Ops: Ops, RedOps: RedOps,
	DTypes: []numerics.DType{numerics.F64, numerics.F32, numerics.BF16, numerics.I8, numerics.F8E4M3}, Counts: []int{0, 1, 7, 1021}, Root: 0}

// The device rows (upload, the device communicator out of place and in place, download,
// #wrong, digest, event timing, records gathered over the host communicator) equal the host
// rows of the same cases bit for bit, on worlds of 1 to 4 ranks, with nothing left allocated.
func TestDeviceRowsEqualHostRowsBitForBit(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		m := deviceMatrix
		m.Root = n - 1
		cases := m.Cases(n)
		done := 0
		dev, node, err := runFakeCuda(t, n, Config{Cases: cases, Mode: dist.Deterministic, Seed: 5, Iters: 2, Warmup: 1,
			Progress: func(d, total int) { done = d }})
		if err != nil {
			t.Fatalf("world %d: %v", n, err)
		}
		if done != len(cases) {
			t.Errorf("world %d: progress reached %d of %d", n, done, len(cases))
		}
		host, err := RunInproc(context.Background(), n, Config{Cases: cases, Mode: dist.Deterministic, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		if len(dev) != len(host) || len(dev) < 50 {
			t.Fatalf("world %d: %d device rows, %d host rows", n, len(dev), len(host))
		}
		if d := CompareDigests(host, dev); len(d) > 0 {
			t.Errorf("world %d: device bits differ from the host's:\n%s", n, strings.Join(d, "\n"))
		}
		for i, r := range dev {
			h := host[i]
			switch {
			case r.Transport != "cuda" || !r.OK || r.Wrong != 0 || r.WrongIP != 0:
				t.Errorf("world %d: %s: transport %s ok %v wrong %d/%d %s", n, r.Key(), r.Transport, r.OK, r.Wrong, r.WrongIP, r.Note)
			case r.Key() != h.Key() || r.Digest != h.Digest || r.DigestIP != h.DigestIP || strings.Join(r.RankDigests, ",") != strings.Join(h.RankDigests, ","):
				t.Errorf("world %d: %s: digest %s/%s, host %s %s/%s", n, r.Key(), short(r.Digest), short(r.DigestIP), h.Key(), short(h.Digest), short(h.DigestIP))
			case r.Bytes > 0 && (r.TimeUS <= 0 || r.TimeUSIP <= 0 || r.BusBWGBs < 0 || r.CopyGBs <= 0 || r.CopyUS <= 0):
				t.Errorf("world %d: %s: untimed: %g us, %g us in place, copy %g GB/s", n, r.Key(), r.TimeUS, r.TimeUSIP, r.CopyGBs)
			case r.Bytes == 0 && r.CopyGBs != 0:
				t.Errorf("world %d: %s: an empty case has a copy time", n, r.Key())
			}
		}
		if c := CompareHost(dev, host); !c.Passed {
			t.Errorf("world %d: %s: %v", n, c.Name, c.Detail)
		}
		if node.allocs != 0 {
			t.Errorf("world %d: %d device allocations left", n, node.allocs)
		}
	}
}

// A planted wrong element on the device is counted, and breaks the bits' equality with the
// host: the device path checks what it downloads, not what it uploaded.
func TestDeviceRowsCountAWrongResult(t *testing.T) {
	cases := []Case{{Op: AllReduce, Red: dist.Sum, DType: numerics.F32, Count: 64}}
	rows, _, err := runFakeCuda(t, 2, Config{Cases: cases, Seed: 5})
	if err != nil || len(rows) != 1 || !rows[0].OK {
		t.Fatalf("%v %+v", err, rows)
	}
	// A communicator whose all_reduce leaves recv alone: every element is wrong on every rank.
	ts := dist.NewInproc(1)
	defer ts[0].Close()
	node := newFakeNode()
	dev := node.device(0)
	d := &DeviceRank{Transport: "cuda", Comm: lazyComm{}, Mem: dev, Host: dist.NewComm(ts[0], dist.Options{})}
	bad, err := RunDeviceRank(context.Background(), d, Config{Cases: cases, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	if bad[0].OK || bad[0].Wrong != 64 || bad[0].WrongIP != 0 {
		// In place, the buffer already holds this rank's input, the answer of a world of 1.
		t.Errorf("lazy all_reduce: ok %v wrong %d/%d", bad[0].OK, bad[0].Wrong, bad[0].WrongIP)
	}
}

// lazyComm is a world of one whose collectives do nothing.
type lazyComm struct{}

func (lazyComm) Rank() int  { return 0 }
func (lazyComm) World() int { return 1 }
func (lazyComm) AllReduce(context.Context, numerics.DType, uint64, uint64, int, dist.RedOp) error {
	return nil
}
func (lazyComm) ReduceScatter(context.Context, numerics.DType, uint64, uint64, int, dist.RedOp) error {
	return nil
}
func (lazyComm) AllGather(context.Context, numerics.DType, uint64, uint64, int) error { return nil }
func (lazyComm) Broadcast(context.Context, numerics.DType, uint64, uint64, int, int) error {
	return nil
}
func (lazyComm) AllToAll(context.Context, numerics.DType, uint64, uint64, int) error { return nil }
func (lazyComm) Synchronize(context.Context) error                                   { return nil }

// What the device path refuses: exact mode (E_UNSUPPORTED), host-frame faults (E_INPUT).
func TestDeviceRankRefusals(t *testing.T) {
	cases := []Case{{Op: AllReduce, Red: dist.Sum, DType: numerics.F32, Count: 8}}
	for _, c := range []struct {
		cfg  Config
		code errs.Code
	}{
		{Config{Cases: cases, Mode: dist.Exact}, errs.Unsupported},
		{Config{Cases: cases, Delay: time.Millisecond}, errs.Input},
		{Config{Cases: cases, Mismatch: &Mismatch{Rank: 0, What: "count"}}, errs.Input},
	} {
		_, _, err := runFakeCuda(t, 1, c.cfg)
		if errs.CodeOf(err) != c.code {
			t.Errorf("%+v: %v, want %s", c.cfg, err, c.code)
		}
	}
}

// CompareHost marks a bit-guaranteed row whose digest differs as failed, reports fast-mode
// differences without failing them, and fails the check when nothing was compared.
func TestCompareHost(t *testing.T) {
	mk := func(tr, mode, digest string) Row {
		return Row{Op: "all_reduce", Transport: tr, Mode: mode, World: 2, DType: "f32", RedOp: "sum", Count: 7, Digest: digest, DigestIP: digest,
			BitsGuaranteed: mode != "fast", OK: true}
	}
	host := []Row{mk("inproc", "deterministic", "aa"), mk("inproc", "fast", "bb")}
	dev := []Row{mk("cuda", "deterministic", "aa"), mk("cuda", "fast", "cc")}
	c := CompareHost(dev, host)
	if !c.Passed || dev[0].HostEqual == nil || !*dev[0].HostEqual || *dev[1].HostEqual || !dev[1].OK || !strings.Contains(c.Name, "1 fast-mode rows differ") {
		t.Errorf("%+v %+v", c, dev)
	}
	dev[0].Digest = "ab"
	c = CompareHost(dev, host)
	if c.Passed || dev[0].OK || !strings.Contains(dev[0].Note, "inproc host transport") || len(c.Detail) != 1 {
		t.Errorf("%+v %+v", c, dev[0])
	}
	if c := CompareHost(dev, nil); c.Passed {
		t.Error("nothing compared, yet passed")
	}
}

// Without a device, a device run is one E_NO_DEVICE error before any rank starts; the flag
// combinations the device transports cannot honour are E_INPUT, also before anything starts.
func TestDeviceRunWithoutDeviceStartsNothing(t *testing.T) {
	probe := DeviceProbe
	t.Cleanup(func() { DeviceProbe = probe })
	probed := 0
	DeviceProbe = func(ctx context.Context, transport string) (string, error) {
		probed++
		return "", errs.New(errs.NoDevice, "no CUDA device here")
	}
	m := Matrix{Ops: []Op{AllReduce}, RedOps: []dist.RedOp{dist.Sum}, DTypes: []numerics.DType{numerics.F32}, Counts: []int{7}}
	for _, tr := range []string{"cuda", "nccl"} {
		// A program that cannot start: reaching the launcher would fail otherwise.
		o := Options{Matrix: m, Transport: tr, Worlds: []int{2}, Program: "/nonexistent/tessera-qa"}
		if _, err := Run(context.Background(), o); errs.CodeOf(err) != errs.NoDevice {
			t.Errorf("%s: %v, want E_NO_DEVICE", tr, err)
		}
		o.Modes = []dist.Mode{dist.Exact}
		if _, err := Run(context.Background(), o); errs.CodeOf(err) != errs.Input {
			t.Errorf("%s exact: %v, want E_INPUT", tr, err)
		}
	}
	if probed != 2 {
		t.Errorf("probed %d times", probed)
	}
}
