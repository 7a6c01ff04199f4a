package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/collectives"
	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

func TestCollectivesInprocJSONRows(t *testing.T) {
	o := cli(t, "collectives", "--np", "3", "--ops", "all_reduce,all_gather,broadcast", "--dtypes", "f32,int8", "--redops", "sum,max",
		"-b", "64", "-e", "4K", "--iters", "2", "--warmup", "1", "--root", "2", "--json", "-")
	o.want(t, ExitOK, "")
	var rep collectives.Report
	mustJSON(t, o.stdout, &rep)
	if !rep.Passed || rep.Kind != collectives.ReportKind || len(rep.Rows) < 20 {
		t.Fatalf("report: passed %v kind %q rows %d", rep.Passed, rep.Kind, len(rep.Rows))
	}
	for _, r := range rep.Rows {
		if r.Transport != "inproc" || r.World != 3 || r.Mode != "deterministic" || r.Wrong != 0 || r.WrongIP != 0 || len(r.Digest) != 64 || !r.OK {
			t.Fatalf("row %+v", r)
		}
		if r.Op == "broadcast" && r.Root != 2 {
			t.Fatalf("broadcast root %d", r.Root)
		}
		if r.Count > 0 && r.Bytes > 0 && (r.TimeUS <= 0 || r.BusBWGBs <= 0) {
			t.Fatalf("untimed row %+v", r)
		}
	}
	// The human table moved to stderr: nccl-tests' columns and the verdict.
	for _, s := range []string{"#wrong", "busbw", "algbw", "out-of-place", "in-place", "# Out of bounds values : 0 OK", "PASS"} {
		if !strings.Contains(o.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, o.stderr)
		}
	}
}

func TestCollectivesExactModeSameBitsOnEveryWorld(t *testing.T) {
	o := cli(t, "collectives", "--mode", "exact", "--np", "1,2,3,4,8", "--ops", "all_reduce", "--dtypes", "f32,bf16", "--redops", "sum",
		"--counts", "1,1021", "-b", "4K", "-e", "4K", "--iters", "0")
	o.want(t, ExitOK, "")
	if !strings.Contains(o.stdout, "check exact all_reduce: the same bits on worlds 1,2,3,4,8 (6 cases): ok") {
		t.Fatalf("no split check line:\n%s", o.stdout)
	}
}

func TestCollectivesBadInput(t *testing.T) {
	for _, c := range []struct {
		args  []string
		code  int
		token string
	}{
		{[]string{"--np", "x"}, ExitUsage, "E_INPUT"},
		{[]string{"--np", "0"}, ExitUsage, "E_INPUT"},
		{[]string{"--np", "2,-1"}, ExitUsage, "E_INPUT"},
		{[]string{"--ops", "reduce"}, ExitUsage, "E_INPUT"},
		{[]string{"--dtypes", "bool"}, ExitUsage, "E_DTYPE"},
		{[]string{"--mode", "quick"}, ExitUsage, "E_INPUT"},
		{[]string{"-b", "1X"}, ExitUsage, "E_INPUT"},
		{[]string{"-b", "4K", "-e", "1K"}, ExitUsage, "E_INPUT"},
		{[]string{"-f", "1"}, ExitUsage, "E_INPUT"},
		{[]string{"--np", "2", "--root", "2"}, ExitUsage, "E_INPUT"},
		{[]string{"--iters", "-1"}, ExitUsage, "E_INPUT"},
		{[]string{"--transport", "pigeon"}, ExitUsage, "E_INPUT"},
		{[]string{"--transport", "cuda", "--mode", "exact"}, ExitUsage, "E_INPUT"},
		{[]string{"--transport", "cuda", "--mode", "deterministic,exact"}, ExitUsage, "E_INPUT"},
		{[]string{"--transport", "nccl", "--np", "1", "--delay", "1ms"}, ExitUsage, "E_INPUT"},
		{[]string{"--transport", "cuda", "--vs", "gloo"}, ExitUsage, "E_INPUT"},
		{[]string{"--vs", "nccl"}, ExitUsage, "E_INPUT"},
		{[]string{"--np", "3", "--mismatch", "1:count", "--timeout", "5s"}, ExitUsage, "E_DESYNC"},
	} {
		o := cli(t, append([]string{"collectives", "-e", "1K"}, c.args...)...)
		if o.code != c.code || o.errToken(t) != c.token {
			t.Errorf("%v: exit %d %q, want %d %s", c.args, o.code, o.stderr, c.code, c.token)
		}
	}
}

// --vs gloo without an interpreter that runs torch's gloo is a missing environment, found
// before anything is measured.
func TestCollectivesVsGlooWithoutTorch(t *testing.T) {
	t.Setenv(differential.PythonEnv, filepath.Join(t.TempDir(), "no-python"))
	start := time.Now()
	o := cli(t, "collectives", "--vs", "gloo", "--ops", "all_reduce", "-e", "1K")
	o.want(t, ExitMissing, "E_NO_DEVICE")
	if time.Since(start) > 10*time.Second {
		t.Errorf("took %s to notice", time.Since(start))
	}
}

// --vs gloo puts gloo's time, busbw and the ratios (out of place, in place) beside every size, through the same
// bandwidth formula as ours (a fake gloo that takes 1 ms per call, so the test needs no torch).
func TestCollectivesVsGlooColumns(t *testing.T) {
	probe, bench := collectives.GlooProbe, collectives.GlooBench
	t.Cleanup(func() { collectives.GlooProbe, collectives.GlooBench = probe, bench })
	collectives.GlooProbe = func(context.Context) (string, error) { return "fake gloo", nil }
	collectives.GlooBench = func(_ context.Context, world int, op collectives.Op, red dist.RedOp, dt numerics.DType, sizes []int64, iters, warmup int) ([]float64, error) {
		if red == dist.Avg {
			return nil, errs.New(errs.Unsupported, "gloo has no avg")
		}
		out := make([]float64, len(sizes))
		for i, b := range sizes {
			if b > 0 {
				out[i] = 1e-3
			}
		}
		return out, nil
	}
	o := cli(t, "collectives", "--vs", "gloo", "--ops", "all_reduce", "--redops", "sum,avg", "--np", "2", "-b", "1K", "-e", "4K", "--counts", "0", "--iters", "2", "--json", "-")
	o.want(t, ExitOK, "")
	var rep collectives.Report
	mustJSON(t, o.stdout, &rep)
	for _, r := range rep.Rows {
		switch {
		case r.RedOp == "avg" || r.Bytes == 0:
			if r.GlooTimeUS != 0 {
				t.Errorf("%s: a gloo time where gloo cannot run", r.Key())
			}
		case r.GlooTimeUS != 1000 || r.GlooBusBWGBs != float64(r.Bytes)/1e-3/1e9 || r.Ratio != r.BusBWGBs/r.GlooBusBWGBs ||
			r.RatioIP != r.BusBWGBsIP/r.GlooBusBWGBs:
			t.Errorf("%s: gloo %g us, %g GB/s, ratio %g out of place, %g in place", r.Key(), r.GlooTimeUS, r.GlooBusBWGBs, r.Ratio, r.RatioIP)
		}
	}
	if rep.Gloo != "fake gloo" || len(rep.Notes) != 1 || !strings.Contains(o.stderr, "gloo(us)") || !strings.Contains(o.stderr, "# note: E_UNSUPPORTED: gloo has no avg") {
		t.Errorf("gloo %q notes %v\n%s", rep.Gloo, rep.Notes, o.stderr)
	}
}

// Without a CUDA device the device transports are one E_NO_DEVICE line and exit 3, found
// before any rank is started (the program the ranks would run does not even exist here).
func TestCollectivesDeviceTransportWithoutDevice(t *testing.T) {
	if _, err := cuda.Devices(); err == nil {
		t.Skip("a CUDA device is present")
	}
	exe := collectivesExe
	t.Cleanup(func() { collectivesExe = exe })
	collectivesExe = func() (string, error) { return filepath.Join(t.TempDir(), "no-such-tessera-qa"), nil }
	for _, args := range [][]string{
		{"--transport", "cuda", "--np", "2"},
		{"--transport", "cuda", "--np", "4", "--compare-host", "--json", "-"},
		{"--transport", "nccl", "--np", "1"},
	} {
		start := time.Now()
		o := cli(t, append([]string{"collectives", "-e", "1K"}, args...)...)
		o.want(t, ExitMissing, "E_NO_DEVICE")
		if o.stdout != "" || time.Since(start) > 10*time.Second {
			t.Errorf("%v: stdout %q after %s", args, o.stdout, time.Since(start))
		}
	}
}
