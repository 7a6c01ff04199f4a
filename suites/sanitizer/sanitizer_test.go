package sanitizer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/sanitizer"
	"github.com/tessera-qa/tessera-qa/sanitizer/cases"
)

// Where the run's logs and summary go: TESSERA_SANITIZER_OUT (ci/gpu/sanitizer.sh sets it
// under $OUT), else a temporary folder. TESSERA_SANITIZER_TIMEOUT bounds each tool's run in
// seconds (default 100; the planted faults' runs take 60 at most).
const (
	outEnv     = "TESSERA_SANITIZER_OUT"
	timeoutEnv = "TESSERA_SANITIZER_TIMEOUT"
)

// planted is a code-generator fault, the tool that must see it, the paths whose cases hold
// it, and the access the report must name.
type planted struct {
	fault  string
	tool   sanitizer.Tool
	paths  []string
	access string
}

var plantedFaults = []planted{
	{failpoint.PTXStoreOnePastEnd, sanitizer.Memcheck, []string{"simt", "simt-stream"}, "__global__ write"},
	{failpoint.PTXReduceBarrierDropped, sanitizer.Racecheck, []string{"simt-reduce"}, "__shared__"},
}

var _ = Describe("compute-sanitizer", Ordered, ContinueOnFailure, Label("gpu"), func() {
	var (
		tool    string
		version string
		all     []cases.Case
		names   []string
		outDir  string
		timeout = 100 * time.Second
		results []sanitizer.ToolResult
	)

	BeforeAll(func() {
		// With nowhere to run, the summary (when asked for) says so: every tool skipped.
		skip := func(why string) {
			if dir := os.Getenv(outEnv); dir != "" {
				s := sanitizer.Summarise(tool, "", "", nil, nil)
				s.Note = why
				Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
				Expect(s.Write(filepath.Join(dir, "summary.json"))).To(Succeed())
			}
			Skip(why)
		}
		var err error
		if tool, err = sanitizer.Locate(); err != nil {
			skip(err.Error())
		}
		name := cases.ChildBackend(os.Getenv)
		b, err := backend.Get(name)
		if err != nil {
			skip("no " + name + " backend: " + err.Error())
		}
		if err := b.Available(); err != nil {
			skip(name + " unavailable: " + err.Error())
		}
		if v := os.Getenv(timeoutEnv); v != "" {
			s, err := strconv.Atoi(v)
			Expect(err).NotTo(HaveOccurred(), "%s=%q", timeoutEnv, v)
			Expect(s).To(BeNumerically(">", 0), "%s=%q", timeoutEnv, v)
			timeout = time.Duration(s) * time.Second
		}
		n, err := cases.PerPath(os.Getenv)
		Expect(err).NotTo(HaveOccurred())
		all, err = cases.Select(n)
		Expect(err).NotTo(HaveOccurred())
		names = cases.Names(all)
		if outDir = os.Getenv(outEnv); outDir == "" {
			outDir = GinkgoT().TempDir()
		}
		Expect(os.MkdirAll(outDir, 0o755)).To(Succeed())
		version = sanitizer.Version(context.Background(), tool)
		GinkgoWriter.Printf("%s (%s), %d cases: %s\n", tool, version, len(names), strings.Join(names, " "))
	})

	// run starts this binary under the tool on the cases named, writes the tool's output to
	// the run's folder and judges it.
	// run starts this binary under the tool on the cases named, writes the tool's output to
	// the run's folder and judges it.
	run := func(t sanitizer.Tool, tag string, want []string, env []string, limit time.Duration) sanitizer.ToolResult {
		exe, err := os.Executable()
		Expect(err).NotTo(HaveOccurred())
		res, err := cases.Check(context.Background(), tool, t, []string{exe, "-test.run=^TestSanitizer$"}, want, env, limit,
			filepath.Join(outDir, tag+".log"))
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("%s: %s in %.1fs %s\n", tag, res.Status, res.Seconds, res.Reason)
		return res
	}

	AfterAll(func() {
		if tool == "" || len(results) == 0 {
			return
		}
		s := sanitizer.Summarise(tool, version, "", names, results)
		path := filepath.Join(outDir, "summary.json")
		Expect(s.Write(path)).To(Succeed())
		GinkgoWriter.Printf("summary %s: %s; ran %v, refused %v\n", path, s.Verdict, s.Ran, s.Refused)
	})

	for _, t := range sanitizer.Tools() {
		It(fmt.Sprintf("finds nothing wrong in our kernels with %s", t), func() {
			res := run(t, string(t), names, nil, timeout)
			results = append(results, res)
			if res.Status == sanitizer.Skipped {
				Skip(res.Reason) // recorded in the summary as refused, never a pass
			}
			Expect(res.Status).To(Equal(sanitizer.Pass), "%s", res.Reason)
		})
	}

	Describe("planted code-generator faults", func() {
		for _, p := range plantedFaults {
			It(fmt.Sprintf("catches %s with %s", p.fault, p.tool), func() {
				if !failpoint.Compiled {
					Skip("needs a failpoints build (go test -c -tags failpoints ./suites/sanitizer)")
				}
				want := cases.OnPaths(all, p.paths...)
				Expect(want).NotTo(BeEmpty(), "no case takes %v", p.paths)
				res := run(p.tool, "planted-"+strings.ReplaceAll(p.fault, "/", "_"), want,
					[]string{failpoint.EnvVar + "=" + p.fault}, min(timeout, 60*time.Second))
				if res.Status == sanitizer.Skipped {
					Skip(res.Reason)
				}
				Expect(res.Status).To(Equal(sanitizer.Fail), "%s with %s on: %s", p.tool, p.fault, res.Reason)
				var named []string
				for _, f := range res.Findings {
					if strings.Contains(f.Access, p.access) && f.Kernel != "" {
						named = append(named, f.String())
					}
				}
				Expect(named).NotTo(BeEmpty(), "no %s report naming a kernel and a %s access: %s", p.tool, p.access, res.Reason)
				// The catch is a failing tool run: its own summary, beside the clean run's.
				s := sanitizer.Summarise(tool, version, p.fault, want, []sanitizer.ToolResult{res})
				Expect(s.Write(filepath.Join(outDir, "planted-"+strings.ReplaceAll(p.fault, "/", "_")+".json"))).To(Succeed())
				GinkgoWriter.Printf("planted %s: caught by %s (%d reports): %s\n", p.fault, p.tool, len(res.Findings), named[0])
			})
		}
	})
})
