package gloo

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

var probed struct {
	once sync.Once
	info Info
	err  error
}

// needTorch skips when no torch is importable and none was asked for (TESSERA_QA_PYTHON set
// means it was: then its absence fails, as in package differential).
func needTorch(t *testing.T) Config {
	t.Helper()
	probed.once.Do(func() { probed.info, probed.err = Probe(context.Background(), Config{}) })
	if errs.CodeOf(probed.err) == errs.NoDevice && os.Getenv(differential.PythonEnv) == "" {
		t.Skip(probed.err.Error())
	}
	if probed.err != nil {
		t.Fatal(probed.err)
	}
	return Config{Timeout: 60 * time.Second}
}

// procStat returns the parent PID and process group of pid, from /proc/PID/stat.
func procStat(pid string) (ppid, pgid int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid pgrp ...; comm may hold spaces, so split after its ')'
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 3 {
		return 0, 0, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	return ppid, pgid, err1 == nil && err2 == nil
}

// rankPIDs lists, from /proc, the processes running our rank script that are this test's
// children or members of a process group it started (other sessions on the machine may run
// the script too).
func rankPIDs(groups []int) map[int]bool {
	out := map[int]bool{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(scriptName)) {
			continue
		}
		if ppid, pgid, ok := procStat(e.Name()); ok && (ppid == os.Getpid() || slices.Contains(groups, pgid)) {
			out[pid] = true
		}
	}
	return out
}

// noLeftovers records the PIDs this test starts and checks, when the test ends, that none of
// them and no new rank process of ours (child or member of a started group) is left.
func noLeftovers(t *testing.T) {
	t.Helper()
	before := rankPIDs(nil)
	var mu sync.Mutex
	var mine []int
	started = func(pid int) { mu.Lock(); mine = append(mine, pid); mu.Unlock() }
	t.Cleanup(func() {
		started = nil
		mu.Lock()
		defer mu.Unlock()
		for _, pid := range mine {
			if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
				t.Errorf("rank process %d is still there", pid)
			}
		}
		for pid := range rankPIDs(mine) {
			if !before[pid] {
				t.Errorf("a new process %d runs %s", pid, scriptName)
			}
		}
		if len(mine) == 0 && !t.Skipped() {
			t.Errorf("no rank process was started")
		}
	})
}

func randomInputs(dt numerics.DType, world int, shape []int, seed uint64, gen func(*rand.Rand) float64) []*tensor.Tensor {
	rng := rand.New(rand.NewPCG(seed, 7))
	ins := make([]*tensor.Tensor, world)
	for r := range ins {
		vals := make([]float64, tensor.NumElems(shape))
		for i := range vals {
			vals[i] = gen(rng)
		}
		ins[r] = tensor.FromFloat64(dt, shape, vals)
	}
	return ins
}

func normal(r *rand.Rand) float64 { return r.NormFloat64() }

func TestAllReduceSumF32MatchesFloat64Sum(t *testing.T) {
	cfg := needTorch(t)
	for _, world := range []int{1, 2, 4} {
		t.Run(strconv.Itoa(world)+"ranks", func(t *testing.T) {
			noLeftovers(t)
			ins := randomInputs(numerics.F32, world, []int{3, 37}, uint64(world), normal)
			outs, err := Collective(context.Background(), cfg, "all_reduce", "sum", 0, ins)
			if err != nil {
				t.Fatal(err)
			}
			nonzero := 0
			for r, o := range outs {
				if o.TypeString() != ins[0].TypeString() {
					t.Fatalf("rank %d: %s, want %s", r, o.TypeString(), ins[0].TypeString())
				}
				for i := range o.Len() {
					var sum, mag float64
					for _, in := range ins {
						sum += in.Float64(i)
						mag += math.Abs(in.Float64(i))
					}
					// one f32 rounding per addition: (world-1) ulps of the running magnitude
					if d := math.Abs(o.Float64(i) - sum); d > 1e-6+float64(world)*0x1p-24*mag {
						t.Fatalf("rank %d element %d: %g, float64 sum %g", r, i, o.Float64(i), sum)
					}
					if math.Abs(o.Float64(i)) > 1e-3 {
						nonzero++
					}
				}
			}
			if nonzero < len(outs)*outs[0].Len()/2 {
				t.Fatalf("only %d of %d outputs are away from zero", nonzero, len(outs)*outs[0].Len())
			}
		})
	}
}

func TestAllReduceMaxMinAvg(t *testing.T) {
	cfg := needTorch(t)
	noLeftovers(t)
	const world = 3
	ins := randomInputs(numerics.F64, world, []int{50}, 3, normal)
	reds := []string{"max", "min", "avg"}
	var reqs []Request
	for _, red := range reds {
		reqs = append(reqs, Request{Op: "all_reduce", Red: red, Inputs: ins})
	}
	replies := Batch(context.Background(), cfg, reqs) // one interpreter start for the three
	for k, red := range reds {
		outs, err := replies[k].Outs, replies[k].Err
		if err != nil {
			t.Fatal(err)
		}
		if len(outs) != world {
			t.Fatalf("%s: %d outputs, want %d", red, len(outs), world)
		}
		for i := range ins[0].Len() {
			want := ins[0].Float64(i)
			for _, in := range ins[1:] {
				switch red {
				case "max":
					want = math.Max(want, in.Float64(i))
				case "min":
					want = math.Min(want, in.Float64(i))
				default:
					want += in.Float64(i)
				}
			}
			if red == "avg" {
				want /= world
			}
			for r, o := range outs {
				got := o.Float64(i)
				if red != "avg" && got != want || red == "avg" && math.Abs(got-want) > 1e-14 {
					t.Fatalf("%s rank %d element %d: %g, want %g", red, r, i, got, want)
				}
			}
		}
	}
}

func TestInt32SumIsExact(t *testing.T) {
	cfg := needTorch(t)
	noLeftovers(t)
	ins := randomInputs(numerics.I32, 4, []int{64}, 5, func(r *rand.Rand) float64 { return float64(r.IntN(1<<28) - 1<<27) })
	outs, err := Collective(context.Background(), cfg, "all_reduce", "sum", 0, ins)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ins[0].Len() {
		var want float64
		for _, in := range ins {
			want += in.Float64(i)
		}
		for r, o := range outs {
			if o.Float64(i) != want {
				t.Fatalf("rank %d element %d: %g, want %g", r, i, o.Float64(i), want)
			}
		}
	}
}

// slice returns rows [lo, hi) of a tensor along dim 0, as bytes.
func rows(t *tensor.Tensor, lo, hi int) []byte {
	row := t.Len() / t.Shape[0] * t.DType.Size()
	return t.Data[lo*row : hi*row]
}

// TestDataMovementIsExact sends every dtype through the data-only collectives in one Batch
// (one interpreter start for the twelve collectives, not one each): the outputs must be the inputs'
// bytes, moved.
func TestDataMovementIsExact(t *testing.T) {
	cfg := needTorch(t)
	noLeftovers(t)
	const world = 3
	dts := []numerics.DType{numerics.F32, numerics.F16, numerics.BF16, numerics.I8}
	inputs := make([][]*tensor.Tensor, len(dts))
	var reqs []Request
	for k, dt := range dts {
		ins := randomInputs(dt, world, []int{3, 5}, 11, normal)
		if dt == numerics.I8 {
			ins = randomInputs(dt, world, []int{3, 5}, 11, func(r *rand.Rand) float64 { return float64(r.IntN(256) - 128) })
		}
		ins[1].SetBits(0, ins[1].Bits(0)|1<<(8*dt.Size()-1)) // a negative or -0 somewhere
		inputs[k] = ins
		reqs = append(reqs, Request{Op: "all_gather", Inputs: ins}, Request{Op: "broadcast", Root: 2, Inputs: ins}, Request{Op: "all_to_all", Inputs: ins})
	}
	replies := Batch(context.Background(), cfg, reqs)
	if len(replies) != len(reqs) {
		t.Fatalf("%d replies to %d requests", len(replies), len(reqs))
	}
	for k, dt := range dts {
		ins := inputs[k]
		for j, rep := range replies[3*k : 3*k+3] {
			if rep.Err != nil {
				t.Fatalf("%s %s: %v", reqs[3*k+j].Op, dt, rep.Err)
			}
			if len(rep.Outs) != world {
				t.Fatalf("%s %s: %d outputs, want %d", reqs[3*k+j].Op, dt, len(rep.Outs), world)
			}
		}
		for r, o := range replies[3*k].Outs {
			if o.TypeString() != tensor.TypeString(dt, []int{9, 5}) {
				t.Fatalf("all_gather %s rank %d: %s", dt, r, o.TypeString())
			}
			for s, in := range ins {
				if !bytes.Equal(rows(o, 3*s, 3*s+3), in.Data) {
					t.Fatalf("all_gather %s rank %d: block %d differs from rank %d's input", dt, r, s, s)
				}
			}
		}
		for r, o := range replies[3*k+1].Outs {
			if !bytes.Equal(o.Data, ins[2].Data) {
				t.Fatalf("broadcast %s rank %d differs from root 2's input", dt, r)
			}
		}
		for r, o := range replies[3*k+2].Outs {
			for s, in := range ins {
				if !bytes.Equal(rows(o, s, s+1), rows(in, r, r+1)) {
					t.Fatalf("all_to_all %s rank %d: block %d is not block %d of rank %d", dt, r, s, r, s)
				}
			}
		}
	}
}

func TestUnsupportedIsCoded(t *testing.T) {
	cfg := needTorch(t)
	noLeftovers(t)
	ins := randomInputs(numerics.F32, 2, []int{4}, 1, normal)
	_, err := Collective(context.Background(), cfg, "reduce_scatter", "sum", 0, ins)
	if strings.HasPrefix(probed.info.Torch, "1.") && errs.CodeOf(err) != errs.Unsupported {
		t.Fatalf("reduce_scatter on torch %s: %v, want E_UNSUPPORTED", probed.info.Torch, err)
	}
	t.Log(err)
	start := time.Now()
	_, err2 := Collective(context.Background(), cfg, "reduce_scatter", "sum", 0, ins)
	if errs.CodeOf(err) == errs.Unsupported && (errs.CodeOf(err2) != errs.Unsupported || time.Since(start) > time.Second) {
		t.Fatalf("a known refusal should come back at once: %v after %s", err2, time.Since(start))
	}

	bf := randomInputs(numerics.BF16, 2, []int{4}, 1, normal)
	_, err = Collective(context.Background(), cfg, "all_reduce", "sum", 0, bf)
	if strings.HasPrefix(probed.info.Torch, "1.") && errs.CodeOf(err) != errs.Unsupported {
		t.Fatalf("bf16 sum on torch %s: %v, want E_UNSUPPORTED", probed.info.Torch, err)
	}
	t.Log(err)

	i32 := randomInputs(numerics.I32, 2, []int{4}, 1, normal)
	if _, err := Collective(context.Background(), cfg, "all_reduce", "avg", 0, i32); errs.CodeOf(err) != errs.Unsupported {
		t.Fatalf("int32 avg: %v, want E_UNSUPPORTED", err)
	}
	empty := randomInputs(numerics.F32, 2, []int{0, 3}, 1, normal)
	if _, err := Collective(context.Background(), cfg, "all_gather", "", 0, empty); errs.CodeOf(err) != errs.Unsupported {
		t.Fatalf("empty all_gather: %v, want E_UNSUPPORTED", err)
	}
	outs, err := Collective(context.Background(), cfg, "all_reduce", "sum", 0, empty)
	if err != nil || len(outs) != 2 || outs[1].TypeString() != "f32[0,3]" {
		t.Fatalf("empty all_reduce: %v %v", outs, err)
	}
	fp8 := randomInputs(numerics.F8E4M3, 2, []int{4}, 1, normal)
	if _, err := Collective(context.Background(), cfg, "all_gather", "", 0, fp8); errs.CodeOf(err) != errs.Unsupported {
		t.Fatalf("fp8 all_gather: %v, want E_UNSUPPORTED", err)
	}
	if _, err := Bench(context.Background(), Config{World: 2}, "all_reduce", "avg", "f32", []int{1024}); errs.CodeOf(err) != errs.Unsupported {
		t.Fatalf("bench avg: %v, want E_UNSUPPORTED", err)
	}
}

func TestBadArgumentsAreCoded(t *testing.T) {
	f32 := randomInputs(numerics.F32, 2, []int{3}, 1, normal)
	other := append([]*tensor.Tensor{}, f32[0], tensor.New(numerics.F32, []int{4}))
	cases := []struct {
		name    string
		op, red string
		root    int
		cfg     Config
		ins     []*tensor.Tensor
		code    errs.Code
	}{
		{"unknown op", "all_sum", "sum", 0, Config{}, f32, errs.Input},
		{"unknown reduction", "all_reduce", "mean", 0, Config{}, f32, errs.Input},
		{"reduction on a data op", "all_gather", "sum", 0, Config{}, f32, errs.Input},
		{"root outside", "broadcast", "", 2, Config{}, f32, errs.Input},
		{"root on all_reduce", "all_reduce", "sum", 1, Config{}, f32, errs.Input},
		{"world mismatch", "all_reduce", "sum", 0, Config{World: 3}, f32, errs.Input},
		{"shape mismatch", "all_reduce", "sum", 0, Config{}, other, errs.Shape},
		{"indivisible all_to_all", "all_to_all", "", 0, Config{}, f32, errs.Shape},
		{"no inputs", "all_reduce", "sum", 0, Config{}, nil, errs.Input},
	}
	for _, c := range cases {
		_, err := Collective(context.Background(), c.cfg, c.op, c.red, c.root, c.ins)
		if errs.CodeOf(err) != c.code || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line with %s", c.name, err, c.code)
		}
	}
	for _, c := range []struct {
		name  string
		cfg   Config
		sizes []int
	}{
		{"few iters", Config{World: 2, Iters: 5}, []int{1024}},
		{"no sizes", Config{World: 2}, nil},
		{"size below a chunk", Config{World: 2}, []int{2}},
	} {
		if _, err := Bench(context.Background(), c.cfg, "all_gather", "", "f32", c.sizes); errs.CodeOf(err) != errs.Input {
			t.Errorf("bench %s: %v, want E_INPUT", c.name, err)
		}
	}
}

func TestNoTorchIsNoDevice(t *testing.T) {
	_, err := Collective(context.Background(), Config{Python: "/nonexistent/python3"}, "all_reduce", "sum", 0,
		randomInputs(numerics.F32, 2, []int{3}, 1, normal))
	if errs.CodeOf(err) != errs.NoDevice {
		t.Fatalf("missing interpreter: %v, want E_NO_DEVICE", err)
	}
	needTorch(t)
	noLeftovers(t)
	// An interpreter where "import torch" fails: a torch.py that raises shadows the real one.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "torch.py"), []byte("raise ImportError('no torch here')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYTHONPATH", dir)
	_, err = Collective(context.Background(), Config{}, "all_reduce", "sum", 0, randomInputs(numerics.F32, 2, []int{3}, 1, normal))
	if errs.CodeOf(err) != errs.NoDevice || !strings.Contains(err.Error(), "no torch here") {
		t.Fatalf("no torch: %v, want E_NO_DEVICE with the reason", err)
	}
	if _, err := Probe(context.Background(), Config{}); errs.CodeOf(err) != errs.NoDevice {
		t.Fatalf("probe without torch: %v, want E_NO_DEVICE", err)
	}
}

func TestHungOrDeadRankEndsTheGroup(t *testing.T) {
	needTorch(t)
	cases := []struct {
		env, value string
		code       errs.Code
		want       []string
	}{
		{"TESSERA_GLOO_TEST_HANG_RANK", "1", errs.TimeoutComm, []string{"rank 1 stuck before the collective", "rank 0 in the collective", "hangs before step 0"}},
		{"TESSERA_GLOO_TEST_HANG_RANK", "2:init", errs.CommInit, []string{"rank 2 stuck before the rendezvous", "hangs before the rendezvous"}},
		{"TESSERA_GLOO_TEST_EXIT_RANK", "1", errs.TimeoutComm, []string{"rank 1 exited", "exit status 3", "exits before step 0"}},
	}
	for _, c := range cases {
		t.Run(c.env+"="+c.value, func(t *testing.T) {
			noLeftovers(t)
			t.Setenv(c.env, c.value)
			timeout := 3 * time.Second // the wait that must end: every case waits it out once
			start := time.Now()
			_, err := Collective(context.Background(), Config{Timeout: timeout}, "all_reduce", "sum", 0,
				randomInputs(numerics.F32, 3, []int{8}, 1, normal))
			took := time.Since(start)
			t.Logf("%s after %s", err, took.Round(time.Millisecond))
			if errs.CodeOf(err) != c.code {
				t.Fatalf("%v, want %s", err, c.code)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message lacks %q: %v", w, err)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("message has several lines: %q", err)
			}
			// the import (its own allowance: a loaded machine takes tens of seconds to import torch
			// three times) plus the rendezvous and the one timed-out wait
			if bound := startup(Config{Timeout: timeout}) + 2*timeout; took > bound {
				t.Errorf("took %s with timeout %s, bound %s", took, timeout, bound)
			}
		})
	}
}

func TestCallerContextEndsTheGroup(t *testing.T) {
	needTorch(t)
	noLeftovers(t)
	t.Setenv("TESSERA_GLOO_TEST_HANG_RANK", "0")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	_, err := Collective(ctx, Config{}, "all_gather", "", 0, randomInputs(numerics.F32, 2, []int{8}, 1, normal))
	if c := errs.CodeOf(err); c != errs.TimeoutComm && c != errs.CommInit {
		t.Fatalf("%v, want E_TIMEOUT_COMM or E_COMM_INIT", err)
	}
}

func TestBenchTwoRanks(t *testing.T) {
	cfg := needTorch(t)
	noLeftovers(t)
	cfg.World = 2
	for _, op := range []string{"all_reduce", "all_gather", "broadcast", "all_to_all"} {
		red := ""
		if op == "all_reduce" {
			red = "sum"
		}
		rows, err := Bench(context.Background(), cfg, op, red, "f32", []int{4096, 65536 + 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 {
			t.Fatalf("%s: %d rows", op, len(rows))
		}
		for i, r := range rows {
			t.Logf("%+v", r)
			wantCount := []int{1024, 16384}[i]
			if r.Count != wantCount || r.Bytes != 4*wantCount || r.World != 2 || r.Iters != DefaultIters {
				t.Errorf("%s row %d: %+v", op, i, r)
			}
			if !(r.Seconds > 0 && r.P10 > 0 && r.P10 <= r.Seconds && r.Seconds <= r.P90) {
				t.Errorf("%s row %d: times %g %g %g", op, i, r.P10, r.Seconds, r.P90)
			}
		}
	}
	if _, err := Bench(context.Background(), cfg, "reduce_scatter", "sum", "f32", []int{4096}); strings.HasPrefix(probed.info.Torch, "1.") && errs.CodeOf(err) != errs.Unsupported {
		t.Fatalf("bench reduce_scatter: %v, want E_UNSUPPORTED", err)
	}
}

// TestBenchFourRanks prints gloo's all_reduce f32 times for 4 ranks at 1, 4, 16 and 64 MiB;
// it runs only when TESSERA_GLOO_BENCH is set (it takes a minute on two cores).
func TestBenchFourRanks(t *testing.T) {
	if os.Getenv("TESSERA_GLOO_BENCH") == "" {
		t.Skip("set TESSERA_GLOO_BENCH=1 to time gloo all_reduce on 4 ranks")
	}
	cfg := needTorch(t)
	noLeftovers(t)
	cfg.World = 4
	cfg.Timeout = 5 * time.Minute
	rows, err := Bench(context.Background(), cfg, "all_reduce", "sum", "f32", []int{1 << 20, 4 << 20, 16 << 20, 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		t.Logf("%s/%s/%s world %d %9d B: median %.3f ms (p10 %.3f, p90 %.3f) over %d", r.Op, r.Red, r.DType, r.World, r.Bytes, r.Seconds*1e3, r.P10*1e3, r.P90*1e3, r.Iters)
	}
}
