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
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/harness/prop"
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

// programModules compiles a graph's program for sm_90 and returns its kernels' modules.
func programModules(name string, p *compiler.Program) ([]module, error) {
	mods, err := ptx.GenerateProgram(p, ptx.H100)
	if err != nil {
		return nil, err
	}
	out := make([]module, len(mods))
	for i, m := range mods {
		out[i] = module{from: fmt.Sprintf("%s kernel %s", name, p.Kernels[i].Name), path: m.Path, ptx: m.PTX}
	}
	return out, nil
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

// spilling lists the modules with register spills, one line each.
func spilling(as []assembled) []string {
	var out []string
	for _, a := range as {
		if a.err == nil && a.res.Spills() > 0 {
			out = append(out, fmt.Sprintf("%s (%s): %s", a.from, a.path, a.res))
		}
	}
	return out
}

// costTable is the assembler's cost by code path: modules, PTX bytes, time, spills.
func costTable(as []assembled) string {
	type row struct {
		n, bytes, spilled, maxRegs int
		t                          time.Duration
	}
	rows := map[string]*row{}
	for _, a := range as {
		r := rows[a.path]
		if r == nil {
			r = &row{}
			rows[a.path] = r
		}
		r.n++
		r.bytes += len(a.ptx)
		r.t += a.res.Elapsed
		r.spilled += a.res.Spills()
		for _, f := range a.res.Functions {
			r.maxRegs = max(r.maxRegs, f.Registers)
		}
	}
	paths := make([]string, 0, len(rows))
	for p := range rows {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b strings.Builder
	fmt.Fprintf(&b, "%-15s %7s %12s %10s %10s %9s %8s\n", "path", "modules", "PTX KB", "KB/module", "ms/module", "max regs", "spilled")
	for _, p := range paths {
		r := rows[p]
		fmt.Fprintf(&b, "%-15s %7d %12.1f %10.1f %10.1f %9d %8d\n", p, r.n, float64(r.bytes)/1e3, float64(r.bytes)/1e3/float64(r.n),
			float64(r.t.Microseconds())/1e3/float64(r.n), r.maxRegs, r.spilled)
	}
	return b.String()
}

var _ = Describe("NVIDIA's assembler", Label("cpu"), func() {
	It("accepts every kernel of the golden catalogue for sm_90, none spilling registers", func() {
		needTool()
		seen := map[string]bool{}
		var mods []module
		for _, s := range golden.Catalogue() {
			p, err := compiler.Compile(s.Graph, compiler.Options{})
			Expect(err).NotTo(HaveOccurred(), s.Name)
			ms, err := programModules(s.Name, p)
			Expect(err).NotTo(HaveOccurred(), s.Name)
			for _, m := range ms {
				if !seen[m.ptx] { // specs of one op often share their kernels
					seen[m.ptx] = true
					mods = append(mods, m)
				}
			}
		}
		Expect(len(mods)).To(BeNumerically(">", 300), "the catalogue gave too few kernels to mean anything")
		as := assembleAll(mods)
		AddReportEntry(fmt.Sprintf("ptxas %s on %d distinct catalogue kernels", tool.Release, len(as)), costTable(as))
		Expect(rejected(as)).To(BeEmpty())
		Expect(spilling(as)).To(BeEmpty(), "kernels whose registers ptxas spills to local memory")
	})

	It("accepts every kernel of random graphs for sm_90, and says what they cost it", func() {
		needTool()
		gen := prop.Raw(prop.DefaultConfig())
		var mods []module
		seed := int(GinkgoRandomSeed())
		for i := range randomGraphs {
			c := gen.Example(seed + i)
			p, err := compiler.Compile(c.Graph, compiler.Options{})
			Expect(err).NotTo(HaveOccurred(), "graph %d (seed %d): %s", i, seed+i, c.Ops())
			ms, err := programModules(fmt.Sprintf("graph %d (rapid example seed %d, %s)", i, seed+i, c.Ops()), p)
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
		AddReportEntry(fmt.Sprintf("ptxas %s on %d random graphs (%d kernels, %.1f KB PTX, %.0f ms of ptxas a graph)",
			tool.Release, randomGraphs, len(as), float64(bytes)/1e3, float64(total.Milliseconds())/randomGraphs), costTable(as))
		Expect(rejected(as)).To(BeEmpty())
	})

	It("has a reason when it cannot assemble the H100's sm_90a kernels (wgmma)", func() {
		needTool()
		var gemm *golden.Spec
		for _, s := range golden.SpecsFor("matmul", numerics.BF16) {
			gemm = &s
			break
		}
		Expect(gemm).NotTo(BeNil())
		p, err := compiler.Compile(gemm.Graph, compiler.Options{})
		Expect(err).NotTo(HaveOccurred())
		t := ptx.H100
		t.ArchSuffix = "a"
		mods, err := ptx.GenerateProgram(p, t)
		Expect(err).NotTo(HaveOccurred())
		_, err = tool.Assemble(context.Background(), mods[0].PTX, gemm.Name)
		if err != nil && strings.Contains(err.Error(), "does not assemble sm_90a") {
			Skip(fmt.Sprintf("ptxas %s predates sm_90a (CUDA 12.0): the wgmma kernels are checked by the simulator in CI and by the driver on the GPU machine", tool.Release))
		}
		Expect(err).NotTo(HaveOccurred())
	})
})
