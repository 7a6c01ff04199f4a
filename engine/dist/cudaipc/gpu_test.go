package cudaipc

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/internal/gpucheck"
	"github.com/tessera-qa/tessera-qa/engine/dist/internal/spawn"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// GPU tests: ranks are processes on the one GPU (this binary re-executed per rank, see
// engine/dist/internal/spawn), meeting over the tcp transport with a store on port 0. They
// skip, with the reason, where there is no usable CUDA device. Set TESSERA_GPU_ARTIFACTS to a
// folder to keep each run's case lines and benchmark rows there.

func TestMain(m *testing.M) {
	role := spawn.Role()
	if role == "" {
		os.Exit(m.Run())
	}
	var err error
	switch role {
	case "collectives":
		err = childCollectives()
	case "peerdeath":
		err = childPeerDeath()
	case "bench":
		err = childBench()
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// gpu skips t unless a CUDA device of compute capability 9.0+ is visible. It does not create
// a context in the parent: only the ranks use the device.
func gpu(t *testing.T) cuda.DeviceInfo {
	t.Helper()
	devs, err := cuda.Devices()
	if err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	if devs[0].CCMajor < 9 {
		t.Skipf("CUDA device %s is %s; the engine's kernels need sm_90", devs[0].Name, devs[0].Arch())
	}
	return devs[0]
}

// rankSetup joins the job: the local device, the tcp transport from the environment, the
// communicator (whose Close closes the transport).
func rankSetup(ctx context.Context, timeout time.Duration) (*DeviceComm, error) {
	return Join(ctx, Options{Timeout: timeout})
}

// deviceCase is gpucheck's device run on a DeviceComm: Alloc'ed buffers (read in place by the
// peers) or, for staged cases, plain device memory.
func deviceCase(dc *DeviceComm) gpucheck.Device {
	return func(ctx context.Context, c gpucheck.Case, send []byte, recvBytes int) ([]byte, error) {
		dev := dc.Device()
		var sendP, recvP uint64
		var bufs []Buffer
		var raw []uint64
		for _, n := range []int{len(send), recvBytes} {
			if c.Staged {
				p, err := dev.Alloc(max(n, 1))
				if err != nil {
					return nil, err
				}
				raw = append(raw, p)
			} else {
				b, err := dc.Alloc(ctx, max(n, 1))
				if err != nil {
					return nil, err
				}
				bufs = append(bufs, b)
			}
		}
		if c.Staged {
			sendP, recvP = raw[0], raw[1]
		} else {
			sendP, recvP = bufs[0].Ptr, bufs[1].Ptr
		}
		if err := dev.Upload(ctx, sendP, send); err != nil {
			return nil, err
		}
		var err error
		switch c.Op {
		case dist.OpAllReduce:
			err = dc.AllReduce(ctx, c.DType, sendP, recvP, c.Count, c.Red)
		case dist.OpReduceScatter:
			err = dc.ReduceScatter(ctx, c.DType, sendP, recvP, c.Count, c.Red)
		case dist.OpAllGather:
			err = dc.AllGather(ctx, c.DType, sendP, recvP, c.Count)
		case dist.OpBroadcast:
			err = dc.Broadcast(ctx, c.DType, sendP, recvP, c.Count, c.Root)
		case dist.OpAllToAll:
			err = dc.AllToAll(ctx, c.DType, sendP, recvP, c.Count)
		}
		if err != nil {
			return nil, err
		}
		if err := dc.Synchronize(ctx); err != nil {
			return nil, err
		}
		out := make([]byte, recvBytes)
		if err := dev.Download(ctx, out, recvP); err != nil {
			return nil, err
		}
		for _, b := range bufs {
			if err := dc.Free(ctx, b); err != nil {
				return nil, err
			}
		}
		for _, p := range raw {
			if err := dev.Free(p); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
}

// runMatrix runs gpucheck's matrix (counts up to maxCount) on dc, three runs per case.
func runMatrix(ctx context.Context, dc *DeviceComm, maxCount int, emit func(gpucheck.Result)) (failed int, err error) {
	for _, c := range gpucheck.Matrix(dc.World()) {
		if c.Count > maxCount {
			continue
		}
		res, err := gpucheck.Run(ctx, c, 2026, dc.World(), dc.Rank(), 3, deviceCase(dc))
		if err != nil {
			return failed, err
		}
		emit(res)
		if !res.OK() {
			failed++
		}
	}
	return failed, nil
}

func childCollectives() error {
	ctx := context.Background()
	dc, err := rankSetup(ctx, 3*time.Minute)
	if err != nil {
		return err
	}
	failed, err := runMatrix(ctx, dc, 1<<20, func(r gpucheck.Result) { fmt.Println(r) })
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if cerr := dc.Close(cctx); err == nil {
		err = cerr
	}
	if err == nil && failed > 0 {
		err = fmt.Errorf("%d cases failed", failed)
	}
	return err
}

// The same matrix on simulated devices: the GPU test's own logic, checked in CI.
func TestGPUMatrixLogicOnSimulatedDevices(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	out := world(t, 2, 0, Options{}, func(dc *DeviceComm) error {
		failed, err := runMatrix(context.Background(), dc, 1023, func(r gpucheck.Result) {})
		if err == nil && failed > 0 {
			err = fmt.Errorf("%d cases failed", failed)
		}
		return err
	})
	for r, err := range out {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestGPUCollectivesAsProcesses(t *testing.T) {
	gpu(t)
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("world%d", n), func(t *testing.T) {
			rep, err := spawn.World(context.Background(), n, "collectives", nil, 9*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			artifact(t, fmt.Sprintf("cudaipc_collectives_w%d.txt", n), rep.String())
			if rep.Failed() || len(rep.Left) > 0 {
				t.Fatalf("ranks failed or were left:\n%s", rep)
			}
			// Every rank holds the same all_reduce result: equal digests across ranks.
			byCase := map[string]string{}
			cases := 0
			for _, r := range rep.Ranks {
				for _, line := range strings.Split(r.Stdout, "\n") {
					if !strings.HasPrefix(line, "CASE all_reduce/") {
						continue
					}
					f := strings.Fields(line)
					key, digest := f[1], f[2]
					if prev, ok := byCase[key]; ok && prev != digest {
						t.Errorf("%s: rank %d has %s, another rank %s", key, r.Rank, digest, prev)
					}
					byCase[key] = digest
					cases++
				}
			}
			if cases == 0 {
				t.Fatalf("no case lines:\n%s", rep)
			}
			t.Logf("world %d: %d all_reduce case lines agree across ranks; rank 0:\n%s", n, cases, rep.Ranks[0].Stdout)
		})
	}
}

func childPeerDeath() error {
	ctx := context.Background()
	dc, err := rankSetup(ctx, 20*time.Second)
	if err != nil {
		return err
	}
	if dc.Rank() == 1 {
		os.Exit(0) // dies without closing: its connections and mappings vanish with it
	}
	b, err := dc.Alloc(ctx, 4096)
	if err != nil {
		return err
	}
	start := time.Now()
	err = dc.AllReduce(ctx, numerics.F32, b.Ptr, b.Ptr, 1024, dist.Sum)
	fmt.Printf("PEERDEATH after %s: %v\n", time.Since(start).Round(time.Millisecond), err)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = dc.Close(cctx)
	if errs.CodeOf(err) != errs.TimeoutComm || !strings.Contains(err.Error(), "rank 1") {
		return fmt.Errorf("want E_TIMEOUT_COMM naming rank 1, got %v", err)
	}
	return nil
}

func TestGPUDeadPeerIsNamed(t *testing.T) {
	gpu(t)
	rep, err := spawn.World(context.Background(), 2, "peerdeath", nil, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed() || len(rep.Left) > 0 {
		t.Fatalf("%s", rep)
	}
	t.Logf("%s", strings.TrimSpace(rep.Ranks[0].Stdout))
}

func childBench() error {
	rows, err := BenchRank(context.Background(), BenchOptions{Seed: 7})
	if err != nil {
		return err
	}
	if os.Getenv("RANK") == "0" {
		for _, r := range rows {
			b, _ := json.Marshal(r)
			fmt.Println("BENCH", string(b))
		}
	}
	return nil
}

// TestGPUBenchAllReduce times all_reduce f32 1 MiB .. 256 MiB on 2 and 4 ranks against the
// device's copy bandwidth measured in the same process (TESSERA_GPU_BENCH=0 skips it).
func TestGPUBenchAllReduce(t *testing.T) {
	info := gpu(t)
	if os.Getenv("TESSERA_GPU_BENCH") == "0" {
		t.Skip("TESSERA_GPU_BENCH=0")
	}
	for _, n := range []int{2, 4} {
		rep, err := spawn.World(context.Background(), n, "bench", nil, 9*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Failed() || len(rep.Left) > 0 {
			t.Fatalf("world %d:\n%s", n, rep)
		}
		var lines []string
		var js []string
		for _, line := range strings.Split(rep.Ranks[0].Stdout, "\n") {
			raw, ok := strings.CutPrefix(line, "BENCH ")
			if !ok {
				continue
			}
			var row BenchRow
			if err := json.Unmarshal([]byte(raw), &row); err != nil {
				t.Fatal(err)
			}
			if row.Wrong > 0 {
				t.Errorf("world %d %d bytes: %d wrong elements", n, row.Bytes, row.Wrong)
			}
			lines = append(lines, row.String())
			js = append(js, raw)
		}
		if len(lines) == 0 {
			t.Fatalf("world %d: no rows:\n%s", n, rep)
		}
		t.Logf("cuda transport, %d ranks on one %s (%s), all_reduce f32 sum, deterministic:\n%s", n, info.Name, time.Now().Format("2006-01-02"), strings.Join(lines, "\n"))
		artifact(t, fmt.Sprintf("cudaipc_bench_w%d.jsonl", n), strings.Join(js, "\n")+"\n")
	}
}

func artifact(t *testing.T, name, content string) {
	dir := os.Getenv("TESSERA_GPU_ARTIFACTS")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err == nil {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Logf("artifact %s: %v", name, err)
		}
	}
}
