package property

import (
	"runtime"

	"github.com/onsi/gomega"
	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

var agreeRef = Property{
	Name:   "agree/ref",
	Judged: "tolerance",
	Checks: 1000,
	Doc: "a random graph of 1-12 ops over the whole registry gives the golden model's outputs " +
		"within the tolerance policy (NaN and Inf at the same positions)",
	Body: func(e Env) func(*rapid.T) {
		gen := Cases(e.Config)
		return func(t *rapid.T) {
			c := gen.Draw(t, "case")
			e.run(t, "agree/ref", c.Harness(Suite, caseName("agree/ref"), 0))
		}
	},
}

var agreeNaNInf = Property{
	Name:   "agree/nan-inf",
	Judged: "tolerance",
	Checks: 400,
	Doc: "with ±0, subnormals, ±Inf, NaN and extreme logits in every float input, NaN and Inf " +
		"appear exactly where the golden model has them (the guard is off: all-NaN outputs are the point)",
	Body: func(e Env) func(*rapid.T) {
		cfg := e.Config
		cfg.Special = true
		gen := Cases(cfg).Filter(NonFinite)
		return func(t *rapid.T) {
			c := gen.Draw(t, "case")
			e.run(t, "agree/nan-inf", c.Harness(Suite, caseName("agree/nan-inf"), 0))
		}
	},
}

var determinism = Property{
	Name:   "determinism/bitwise",
	Judged: "bitwise",
	Checks: 300,
	Doc: "a random graph compiled and run twice, the second time under GOMAXPROCS 1, gives the " +
		"same output digests (design.md §4)",
	Body: func(e Env) func(*rapid.T) {
		gen := Raw(e.Config)
		return func(t *rapid.T) {
			c := gen.Draw(t, "case")
			hc := c.Harness(Suite, caseName("determinism/bitwise"), 0)
			first, err := runOnce(e, hc)
			gomega.NewWithT(t).Expect(err).NotTo(gomega.HaveOccurred(), "first run of %s", ops(c.Graph))
			hc.ExpectDigests, hc.Tolerances = harness.Digests(first), nil
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			e.run(t, "determinism/bitwise", hc)
		}
	},
}

// runOnce compiles and runs c on e's backend.
func runOnce(e Env, c harness.Case) ([]*tensor.Tensor, error) {
	p, err := compiler.Compile(c.Graph, compiler.Options{})
	if err != nil {
		return nil, err
	}
	in := make(map[string]*tensor.Tensor, len(c.Inputs))
	for k, v := range c.Inputs {
		in[k] = v.Clone()
	}
	return e.Backend.Run(p, in)
}
