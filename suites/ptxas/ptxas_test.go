package ptxas_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx/ptxas"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/property"
)

// randomGraphs is how many random graphs the compile-cost spec assembles.
const randomGraphs = 40

var tool *ptxas.Tool

var _ = BeforeSuite(func() {
	var err error
	tool, err = ptxas.Find()
	if err != nil && os.Getenv(ptxas.Var) != "" {
		Fail(fmt.Sprintf("%s is set but the assembler does not answer: %v", ptxas.Var, err))
	}
})

func needTool() {
	if tool == nil {
		Skip("no ptxas on this machine (ci/setup.d/60-ptxas.sh installs it): " + ptxas.Var + " unset and none on PATH")
	}
}

// module is one generated kernel and where it came from.
type module struct {
	from string // spec or graph, and kernel
	path string
	ptx  string
}

// assembled is one module's assembly, or why it failed.
type assembled struct {
	module
	res ptxas.Result
	err error
}

// assembleAll runs ptxas on every module, two at a time (CI has two cores).
func assembleAll(mods []module) []assembled {
	out := make([]assembled, len(mods))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	next := make(chan int)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				res, err := tool.Assemble(ctx, mods[i].ptx, mods[i].from)
				out[i] = assembled{mods[i], res, err}
			}
		}()
	}
	for i := range mods {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// programModules generates a program's kernels for target t, each named by name and kernel.
func programModules(name string, p *compiler.Program, t ptx.Target) ([]module, error) {
	mods, err := ptx.GenerateProgram(p, t)
	if err != nil {
		return nil, err
	}
	out := make([]module, len(mods))
	for i, m := range mods {
		out[i] = module{from: fmt.Sprintf("%s kernel %s", name, p.Kernels[i].Name), path: m.Path, ptx: m.PTX}
	}
	return out, nil
}

// catalogueModules is every distinct module of the golden catalogue's programs for target t
// whose code path keep takes (specs of one op often share their kernels).
// Cases holding an op the code generator declares not lowered yet (ptx.NotLowered) are set
// aside and counted in a report entry; any other refusal fails the spec.
func catalogueModules(t ptx.Target, keep func(path string) bool) []module {
	seen := map[string]bool{}
	var mods []module
	notLowered := 0
	defer func() {
		AddReportEntry(fmt.Sprintf("%d catalogue cases set aside: an op %s", notLowered, ptx.NotLowered))
	}()
	for _, s := range golden.Catalogue() {
		p, err := compiler.Compile(s.Graph, compiler.Options{})
		Expect(err).NotTo(HaveOccurred(), s.Name)
		gen, err := programModules(s.Name, p, t)
		if err != nil && strings.Contains(err.Error(), ptx.NotLowered) {
			notLowered++
			continue
		}
		Expect(err).NotTo(HaveOccurred(), s.Name)
		for _, m := range gen {
			if keep(m.path) && !seen[m.ptx] {
				seen[m.ptx] = true
				mods = append(mods, m)
			}
		}
	}
	return mods
}

// rejected lists the modules ptxas refused, one line each.
func rejected(as []assembled) []string {
	var bad []string
	for _, a := range as {
		if a.err != nil {
			bad = append(bad, fmt.Sprintf("%s (%s): %v", a.from, a.path, a.err))
		}
	}
	return bad
}

// spilling lists the modules with register spills, one line each, but for callSaves.
func spilling(as []assembled) []string {
	var out []string
	saves := 0
	for _, a := range as {
		if a.err == nil && a.res.Spills() > 0 {
			if callSaves(a) {
				saves++
				continue
			}
			out = append(out, fmt.Sprintf("%s (%s): %s", a.from, a.path, a.res))
		}
	}
	AddReportEntry(fmt.Sprintf("%d kernels save at most %d bytes around their fp8 conversion calls", saves, maxCallSave))
	return out
}

// maxCallSave is the most a kernel may spill, each way, around the calls to the fp8 software
// conversion routines: ptxas 11.8 keeps three 64-bit values across the calls of a stream's
// ragged tail in the stack frame (the same kernel without a tail spills nothing). A spill
// from register pressure is larger, or happens in a kernel without such calls.
const maxCallSave = 24

func callSaves(a assembled) bool {
	if !strings.Contains(a.ptx, "call (") || !strings.Contains(a.ptx, "tq_encode_fp8") {
		return false
	}
	for _, f := range a.res.Functions {
		if f.SpillStores > maxCallSave || f.SpillLoads > maxCallSave || f.StackBytes > maxCallSave {
			return false
		}
	}
	return true
}

// Cost is one code path's share of a set of modules, as the report entry "ptxas cost" carries
// it (report/parse/ptxas.go reads it into the dashboard's compile-cost charts).
type Cost struct {
	Set     string  `json:"set"` // "golden catalogue" or "random graphs"
	Path    string  `json:"path"`
	Modules int     `json:"modules"`
	PTXKB   float64 `json:"ptx_kb"`   // PTX a module
	MS      float64 `json:"ms"`       // ptxas wall time a module (two assemblers at a time)
	MaxRegs int     `json:"max_regs"` // the most registers an entry of the path uses
	Spilled int     `json:"spilled"`  // bytes spilled (stores plus loads), over the path's modules
	Release string  `json:"ptxas"`
}

func (c Cost) String() string {
	return fmt.Sprintf("%-14s %4d modules, %6.1f KB PTX and %5.1f ms of ptxas a module, %3d registers at most, %d bytes spilled",
		c.Path, c.Modules, c.PTXKB, c.MS, c.MaxRegs, c.Spilled)
}

// costs is the assembler's cost by code path, in path order.
func costs(set string, as []assembled) []Cost {
	by := map[string]*Cost{}
	var t = map[string]time.Duration{}
	var bytes = map[string]int{}
	for _, a := range as {
		c := by[a.path]
		if c == nil {
			c = &Cost{Set: set, Path: a.path, Release: tool.Release}
			by[a.path] = c
		}
		c.Modules++
		bytes[a.path] += len(a.ptx)
		t[a.path] += a.res.Elapsed
		c.Spilled += a.res.Spills()
		for _, f := range a.res.Functions {
			c.MaxRegs = max(c.MaxRegs, f.Registers)
		}
	}
	out := make([]Cost, 0, len(by))
	for p, c := range by {
		c.PTXKB = float64(bytes[p]) / 1e3 / float64(c.Modules)
		c.MS = float64(t[p].Microseconds()) / 1e3 / float64(c.Modules)
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// reportCosts adds one "ptxas cost" entry a code path.
func reportCosts(set string, as []assembled) {
	for _, c := range costs(set, as) {
		AddReportEntry("ptxas cost", c)
	}
}

var _ = Describe("NVIDIA's assembler", Label("cpu"), func() {
	It("accepts every kernel of the golden catalogue for sm_90, none spilling registers", func() {
		needTool()
		mods := catalogueModules(ptx.H100, func(string) bool { return true })
		Expect(len(mods)).To(BeNumerically(">", 300), "the catalogue gave too few kernels to mean anything")
		as := assembleAll(mods)
		AddReportEntry(fmt.Sprintf("ptxas %s on %d distinct catalogue kernels", tool.Release, len(as)))
		reportCosts("golden catalogue", as)
		Expect(rejected(as)).To(BeEmpty())
		Expect(spilling(as)).To(BeEmpty(), "kernels whose registers ptxas spills to local memory")
	})

	It("accepts every kernel of random graphs for sm_90, and says what they cost it", func() {
		needTool()
		cfg := property.DefaultConfig()
		cfg.Runs = ptx.Lowers
		gen := property.Raw(cfg)
		var mods []module
		seed := int(GinkgoRandomSeed())
		for i := range randomGraphs {
			c := gen.Example(seed + i)
			p, err := compiler.Compile(c.Graph, compiler.Options{})
			Expect(err).NotTo(HaveOccurred(), "graph %d (seed %d): %s", i, seed+i, c.Ops())
			ms, err := programModules(fmt.Sprintf("graph %d (rapid example seed %d, %s)", i, seed+i, c.Ops()), p, ptx.H100)
			Expect(err).NotTo(HaveOccurred())
			mods = append(mods, ms...)
		}
		as := assembleAll(mods)
		var total time.Duration
		bytes := 0
		for _, a := range as {
			total += a.res.Elapsed
			bytes += len(a.ptx)
		}
		AddReportEntry(fmt.Sprintf("ptxas %s on %d random graphs (%d kernels, %.1f KB PTX, %.0f ms of ptxas a graph; the ops ptx.Lowers)",
			tool.Release, randomGraphs, len(as), float64(bytes)/1e3, float64(total.Milliseconds())/randomGraphs))
		reportCosts("random graphs", as)
		Expect(rejected(as)).To(BeEmpty())
	})

	It("accepts the H100's sm_90a kernels of the golden catalogue (wgmma matmul and attention)", func() {
		needTool()
		if !tool.Knows("sm_90a") {
			Skip(fmt.Sprintf("ptxas %s predates sm_90a (CUDA 12.0): the wgmma kernels are checked by the simulator in CI and by the driver on the GPU machine", tool.Release))
		}
		t := ptx.H100
		t.ArchSuffix = "a"
		mods := catalogueModules(t, func(path string) bool { return strings.Contains(path, "wgmma") })
		Expect(mods).NotTo(BeEmpty(), "no wgmma kernel in the catalogue")
		as := assembleAll(mods)
		reportCosts("golden catalogue, sm_90a", as)
		Expect(rejected(as)).To(BeEmpty())
	})
})
