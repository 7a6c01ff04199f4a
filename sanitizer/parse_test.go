package sanitizer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var twoCases = []string{"exp/f32/5x7", "reduce_sum/f32/3x1031-axis1"}

// Each fixture is written from compute-sanitizer's documented output (current and older
// releases' location formats): the parser must name the tool, kernel, access and thread of
// every report, read the summaries, and Judge must give the verdict below.
func TestParseAndJudgeFixtures(t *testing.T) {
	for _, c := range []struct {
		file     string
		tool     Tool
		exit     int
		want     []string
		findings int
		summary  int
		kernels  []string
		access   []string
		thread   string
		refusal  string
		status   Status
		reason   string
	}{
		{"memcheck-oob.txt", Memcheck, ExitCode, twoCases, 1, 1, []string{"tq_k0"}, []string{"__global__ write of size 4 bytes"}, "(34,0,0)", "", Fail, "memcheck: 1 reports: memcheck: Invalid __global__ write of size 4 bytes in kernel tq_k0 by thread (34,0,0) in block (0,0,0), address 0x7f3a1c000a8c"},
		{"memcheck-clean.txt", Memcheck, 0, twoCases, 0, 0, nil, nil, "", "", Pass, ""},
		{"memcheck-older-release.txt", Memcheck, ExitCode, nil, 2, 2, []string{"copy_rows", "tq_k1"}, []string{"__global__ read of size 16 bytes", "__shared__ write of size 8 bytes"}, "(255,0,0)", "", Fail, "2 reports"},
		{"racecheck-race.txt", Racecheck, ExitCode, []string{"reduce_sum/f32/3x1031-axis1"}, 1, 1, []string{"tq_k0"}, []string{"__shared__ Write/Read"}, "", "", Fail, "Race reported between Write access at tq_k0+0x1b80 in kernel tq_k0"},
		{"racecheck-hazard-older.txt", Racecheck, ExitCode, nil, 2, 2, []string{"block_sum", "tq_k2"}, []string{"__shared__ RAW hazard", "__shared__ Write/Write"}, "(33,0,0)", "", Fail, "2 reports"},
		{"initcheck-uninit.txt", Initcheck, ExitCode, []string{"softmax/f32/7x1000"}, 1, 1, []string{"tq_k0"}, []string{"__global__ read of size 4 bytes"}, "(7,0,0)", "", Fail, "Uninitialized __global__ memory read"},
		{"synccheck-divergent.txt", Synccheck, ExitCode, nil, 1, 1, []string{"tq_k3"}, []string{"barrier"}, "(96,0,0)", "", Fail, "Divergent thread(s) in block in kernel tq_k3"},
		{"refused.txt", Racecheck, 0, []string{"exp/f32/5x7"}, 0, 0, nil, nil, "", "Error: Racecheck is not supported on this device.", Skipped, "the tool refused: Error: Racecheck is not supported"},
		{"internal-error.txt", Memcheck, 1, twoCases, 0, -1, nil, nil, "", "Internal Sanitizer Error: The Sanitizer failed to initialize its device-side state (error 999)", Skipped, "Internal Sanitizer Error"},
		{"api-error.txt", Memcheck, ExitCode, nil, 1, 1, nil, []string{"API call cuMemcpyDtoH_v2 (CUDA_ERROR_INVALID_VALUE)"}, "", "", Fail, "Program hit CUDA_ERROR_INVALID_VALUE"},
		{"crashed.txt", Memcheck, 2, twoCases, 0, -1, nil, nil, "", "", Error, "no ERROR SUMMARY line: memcheck did not finish (exit 2); last output: fatal error: unexpected signal"},
	} {
		t.Run(c.file, func(t *testing.T) {
			text := fixture(t, c.file)
			o := Parse(c.tool, text)
			if len(o.Findings) != c.findings || o.Summary != c.summary || o.Refusal != c.refusal {
				t.Fatalf("findings %d, summary %d, refusal %q; want %d, %d, %q\n%+v", len(o.Findings), o.Summary, o.Refusal, c.findings, c.summary, c.refusal, o.Findings)
			}
			var kernels, access []string
			for _, f := range o.Findings {
				if f.Tool != c.tool {
					t.Errorf("finding of tool %s, want %s", f.Tool, c.tool)
				}
				if f.Kernel != "" {
					kernels = append(kernels, f.Kernel)
				}
				access = append(access, f.Access)
			}
			if !slices.Equal(kernels, c.kernels) || !slices.Equal(access, c.access) {
				t.Errorf("kernels %q access %q, want %q %q", kernels, access, c.kernels, c.access)
			}
			if c.thread != "" && o.Findings[0].Thread != c.thread {
				t.Errorf("thread %q, want %q", o.Findings[0].Thread, c.thread)
			}
			for _, f := range o.Findings {
				for _, d := range f.Detail {
					if strings.Contains(d, "Host Frame") {
						t.Errorf("backtrace line kept as detail: %q", d)
					}
				}
			}
			r := Judge(Run{Tool: c.tool, Exit: c.exit, Output: text}, c.want)
			if r.Status != c.status || !strings.Contains(r.Reason, c.reason) {
				t.Errorf("Judge: %s %q, want %s containing %q", r.Status, r.Reason, c.status, c.reason)
			}
		})
	}
}

func TestOOBFindingKeepsTheAllocationLine(t *testing.T) {
	o := Parse(Memcheck, fixture(t, "memcheck-oob.txt"))
	f := o.Findings[0]
	if f.Address != "0x7f3a1c000a8c" || f.Block != "(0,0,0)" || f.Where != "tq_k0+0x3f0" {
		t.Errorf("finding %+v", f)
	}
	if !slices.ContainsFunc(f.Detail, func(d string) bool { return strings.Contains(d, "0 bytes after the nearest allocation") }) {
		t.Errorf("detail %q lacks the allocation line", f.Detail)
	}
	if cs := Cases(o.Child); len(cs) != 2 || cs[0].Name != "exp/f32/5x7" || cs[1].Verdict != "pass" {
		t.Errorf("cases %+v", cs)
	}
}

func TestRaceSummaryAndHazards(t *testing.T) {
	o := Parse(Racecheck, fixture(t, "racecheck-hazard-older.txt"))
	if !slices.Equal(o.RaceSummary, []int{2, 1, 1}) {
		t.Errorf("race summary %v", o.RaceSummary)
	}
	if o.Findings[0].Address != "__shared__ 0x40 in block (2, 0, 0)" || o.Findings[1].Hazards != 32 {
		t.Errorf("findings %+v", o.Findings)
	}
	o = Parse(Racecheck, fixture(t, "racecheck-race.txt"))
	if o.Findings[0].Hazards != 1984 {
		t.Errorf("hazards %d, want 1984", o.Findings[0].Hazards)
	}
}

// The child's verdicts count even when the tool is silent: a case that was wrong, or one
// that never reported, is not a pass; nor is a clean tool whose child exited non-zero, nor a
// run its deadline stopped.
func TestJudgeCasesExitAndDeadline(t *testing.T) {
	clean := fixture(t, "memcheck-clean.txt")
	for _, c := range []struct {
		name   string
		run    Run
		want   []string
		status Status
		reason string
	}{
		{"a wrong case", Run{Tool: Memcheck, Output: strings.Replace(clean, "pass reduce_sum/f32/3x1031-axis1", "fail reduce_sum/f32/3x1031-axis1 out[0] 3 mismatches", 1)}, twoCases, Fail, "1 of 2 cases not right under memcheck: reduce_sum/f32/3x1031-axis1 fail: out[0] 3 mismatches"},
		{"a missing case", Run{Tool: Memcheck, Output: clean}, append(twoCases, "softmax/f32/7x1000"), Error, "the child reported 2 of 3 cases (first missing: softmax/f32/7x1000)"},
		{"a bad exit", Run{Tool: Memcheck, Output: clean, Exit: 1}, twoCases, Error, "exit 1 with no report"},
		{"the deadline", Run{Tool: Memcheck, Output: clean, TimedOut: true, Exit: -1, Seconds: 120}, twoCases, Error, "did not finish within its deadline (120 s)"},
		{"the deadline after a report", Run{Tool: Memcheck, Output: strings.TrimSuffix(fixture(t, "memcheck-oob.txt"), "========= ERROR SUMMARY: 1 error\n"), TimedOut: true}, twoCases, Fail, "1 reports before it: memcheck: Invalid __global__ write"},
		{"every case and exit 0", Run{Tool: Memcheck, Output: clean}, twoCases, Pass, ""},
	} {
		r := Judge(c.run, c.want)
		if r.Status != c.status || !strings.Contains(r.Reason, c.reason) {
			t.Errorf("%s: %s %q, want %s containing %q", c.name, r.Status, r.Reason, c.status, c.reason)
		}
	}
}

// A summary that counts more errors than the parser recognised still fails, and says so.
func TestUnparsedReportsStillFail(t *testing.T) {
	r := Judge(Run{Tool: Memcheck, Output: "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 3 errors\n"}, nil)
	if r.Status != Fail || !strings.Contains(r.Reason, "3 reports (0 parsed)") {
		t.Errorf("%s %q", r.Status, r.Reason)
	}
	// A report kind the parser has never seen is a finding too.
	o := Parse(Synccheck, "========= Some new hazard class detected\n=========     at tq_k9+0x10\n========= ERROR SUMMARY: 1 error\n")
	if len(o.Findings) != 1 || o.Findings[0].Kernel != "tq_k9" || o.Findings[0].Access != "unknown" {
		t.Errorf("%+v", o.Findings)
	}
}

func TestSummariseNeverCallsARefusalAPass(t *testing.T) {
	rs := []ToolResult{{Tool: Memcheck, Status: Pass}, {Tool: Racecheck, Status: Skipped, Reason: "the tool refused: x"}}
	s := Summarise("/usr/local/cuda/bin/compute-sanitizer", "v", "", twoCases, rs)
	if s.Verdict != Skipped || !slices.Equal(s.Ran, []Tool{Memcheck}) || !slices.Equal(s.Refused, []Tool{Racecheck}) {
		t.Errorf("%+v", s)
	}
	rs = append(rs, ToolResult{Tool: Initcheck, Status: Fail}, ToolResult{Tool: Synccheck, Status: Error})
	if s := Summarise("p", "", "", nil, rs); s.Verdict != Fail || len(s.Ran) != 2 {
		t.Errorf("%+v", s)
	}
	if s := Summarise("p", "", "", nil, nil); s.Verdict != Skipped {
		t.Errorf("no tool run: %s, want skipped", s.Verdict)
	}
	path := filepath.Join(t.TempDir(), "s.json")
	if err := s.Write(path); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `"schema": "tessera-qa/sanitizer/v1"`) || !strings.Contains(string(b), `"refused": [`) {
		t.Errorf("summary JSON:\n%s", b)
	}
}

// racecheck as the H200 ran it (recorded 2026-12-02): the case lines, then only its RACECHECK
// SUMMARY line, no ERROR SUMMARY. A clean run is a pass; the same run cut before that line is
// still an error (it did not finish).
func TestRecordedH200RacecheckIsAPass(t *testing.T) {
	out := fixture(t, "racecheck-h200-clean.txt")
	var names []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "tessera-sanitizer-case" {
			names = append(names, f[2])
		}
	}
	if len(names) != 9 {
		t.Fatalf("fixture has %d case lines, want 9", len(names))
	}
	if r := Judge(Run{Tool: Racecheck, Output: out}, names); r.Status != Pass {
		t.Fatalf("recorded clean racecheck: %s %s", r.Status, r.Reason)
	}
	cut := out[:strings.Index(out, "========= RACECHECK SUMMARY")]
	if r := Judge(Run{Tool: Racecheck, Output: cut, Exit: 0}, names); r.Status != Error {
		t.Fatalf("racecheck without its summary line: %s %s, want error", r.Status, r.Reason)
	}
}
