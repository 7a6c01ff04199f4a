package differential_test

import (
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"os"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/harness"
)

// setup is one way of running the catalogue: an oracle on a device against an engine backend.
type setup struct {
	oracle  *lazyOracle
	device  string
	backend string
	labels  Labels
}

// seeds is the number of input draws per spec: seeds() for torch on the CPU, which CI runs; one
// for the others unless TESSERA_QA_DIFF_SEEDS says otherwise (jax compiles every op for every
// new shape, about 65 ms a case).
func (s setup) seeds() int {
	if s.oracle.framework == "torch" && s.device == "cpu" {
		return seeds()
	}
	if _, set := os.LookupEnv(seedsEnv); set {
		return seeds()
	}
	return 1
}

func (s setup) String() string {
	return s.oracle.framework + " on " + s.device + " vs the " + s.backend + " backend"
}

var setups = []setup{
	{torchOracle, "cpu", "cpu", Label("cpu", "torch")},
	{torchOracle, "cuda", "cuda", Label("gpu", "torch")},
	{torchOracle, "cuda", "cpu", Label("gpu", "torch")},
	{jaxOracle, "cpu", "cpu", Label("cpu", "jax")},
	{jaxOracle, "cuda", "cuda", Label("gpu", "jax")},
}

// outcomes runs every catalogue case of one op under one setup, once, in batched requests;
// each spec then reads its own cases.
var outcomes = struct {
	sync.Mutex
	m map[string][]differential.Outcome
}{m: map[string][]differential.Outcome{}}

func outcomesOf(s setup, op string) []differential.Outcome {
	o := s.oracle.onDevice(s.device)
	b := engine(s.backend)
	key := s.String() + "/" + op
	outcomes.Lock()
	defer outcomes.Unlock()
	if got, ok := outcomes.m[key]; ok {
		return got
	}
	var specs []golden.Spec
	for _, sp := range golden.Catalogue() {
		if sp.Op == op {
			specs = append(specs, sp)
		}
	}
	cases, err := differential.Cases(specs, s.seeds())
	Expect(err).NotTo(HaveOccurred())
	got := differential.Runner{Oracle: o, Target: differential.Target{Device: s.device}, Backend: b}.Run(cases)
	outcomes.m[key] = got
	return got
}

// expectAgreement fails with every disagreeing case, skips when the oracle cannot compute any
// of them, and passes only when at least one case was compared.
func expectAgreement(outs []differential.Outcome) {
	var bad, unsupported []string
	compared := 0
	for _, o := range outs {
		r := o.Result
		switch r.Verdict {
		case harness.VerdictPass:
			compared++
		case harness.VerdictSkip:
			unsupported = append(unsupported, r.Case+": "+r.Reason)
		case harness.VerdictError:
			if strings.Contains(r.Reason, ptx.NotLowered) {
				unsupported = append(unsupported, r.Case+": "+r.Reason) // a declared gap (ops --coverage)
				continue
			}
			bad = append(bad, r.Case+" ["+r.Verdict+"]: "+r.Reason)
		default:
			bad = append(bad, r.Case+" ["+r.Verdict+"]: "+r.Reason)
		}
	}
	Expect(bad).To(BeEmpty(), "cases disagreeing with the oracle")
	if compared == 0 && len(unsupported) > 0 {
		Skip(strings.Join(unsupported, "; "))
	}
	Expect(compared).To(BeNumerically(">", 0), "no case was compared")
}

// One Describe per setup and op. On torch on the CPU, which CI runs, every catalogue spec is
// its own It (covering all its input draws); the other setups run on the GPU machine or where
// jax is installed, one It per op.
var _ = func() bool {
	specsByOp := map[string][]golden.Spec{}
	for _, sp := range golden.Catalogue() {
		specsByOp[sp.Op] = append(specsByOp[sp.Op], sp)
	}
	for _, s := range setups {
		Describe(s.String(), s.labels, func() {
			for _, def := range graph.Ops() {
				op := def.Name
				Describe(op, Label(op), func() {
					if s.oracle.framework != "torch" || s.device != "cpu" {
						It("agrees on every catalogue case", func() { expectAgreement(outcomesOf(s, op)) })
						return
					}
					It("has catalogue cases", func() { Expect(specsByOp[op]).NotTo(BeEmpty()) })
					for _, sp := range specsByOp[op] {
						It(sp.Name+" agrees", func() {
							var mine []differential.Outcome
							for _, o := range outcomesOf(s, op) {
								if strings.SplitN(o.Result.Case, "#", 2)[0] == sp.Name {
									mine = append(mine, o)
								}
							}
							Expect(mine).To(HaveLen(s.seeds()))
							expectAgreement(mine)
						})
					}
				})
			}
		})
	}
	Describe("torch on cpu vs the cpu backend: coverage", Label("cpu", "torch"), func() {
		It("has a compared case for every (op, dtype) of the registry", func() {
			var all []differential.Outcome
			for _, def := range graph.Ops() {
				all = append(all, outcomesOf(setups[0], def.Name)...)
			}
			var holes []string
			for _, r := range differential.Summarize(nil, all) {
				if r.Verdict == differential.RowNoCases || r.Passed == 0 {
					holes = append(holes, r.Op+"/"+r.DType+" ("+r.Verdict+")")
				}
			}
			Expect(holes).To(BeEmpty())
		})
	})
	return true
}()
