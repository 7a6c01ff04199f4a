package gradients_test

import (
	"fmt"
	"runtime"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/gradients"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Issue 26's convolutions beyond the PerPair cases the tables above draw: every golden
// geometry (stride, padding, dilation, groups, depthwise, bias, C_in != C_out, non-square
// 2-D kernels, the kernels large enough for conv-fft) and the geometries the rules branch on
// (gradients.ConvCases: ragged stride tails, padding beyond the dilated span, a stride that
// skips input), in f64 and f32.
var convEntries = []TableEntry{
	Entry("conv1d", Label("conv1d"), "conv1d", 7+6),
	Entry("conv2d", Label("conv2d"), "conv2d", 4+3),
}

var convDTypes = []numerics.DType{numerics.F64, numerics.F32}

func convCases(op string, perDType int) []gradients.Case {
	cs, err := gradients.CasesTagged(op, convDTypes, "")
	Expect(err).NotTo(HaveOccurred())
	more, err := gradients.ConvCases([]string{op}, convDTypes)
	Expect(err).NotTo(HaveOccurred())
	cs = append(cs, more...)
	Expect(cs).To(HaveLen(perDType*len(convDTypes)), "%s cases", op)
	return cs
}

// convCheck runs the cases and fails on any case that misses its budget, printing each
// case's worst errors: normwise against the float64 rule, directional against finite
// differences, and the float64 rule's own miss of finite differences.
func convCheck(op string, perDType int, vs *gradients.Vs) (compared int) {
	var bad []string
	for _, r := range gradients.CheckAll(engine("cpu"), convCases(op, perDType), gradients.Options{Vs: vs}) {
		var norm, dir, rule float64
		for _, in := range r.Inputs {
			norm, dir, rule = max(norm, in.NormErr), max(dir, in.DirErr), max(rule, in.RuleErr)
		}
		line := fmt.Sprintf("%s: norm %.2g, directional %.2g, rule vs finite differences %.2g", r.Name, norm, dir, rule)
		if r.Oracle != nil {
			worst := 0.0
			for _, in := range r.Oracle.Inputs {
				worst = max(worst, in.NormErr)
			}
			line += fmt.Sprintf("; %s %s %.2g %s", r.Oracle.Framework, r.Oracle.Status, worst, r.Oracle.Note)
			if r.Oracle.Status == gradients.OraclePass {
				compared++
			}
		}
		GinkgoWriter.Println(line)
		if !r.Pass {
			bad = append(bad, fmt.Sprintf("%s: %s %+v", r.Name, r.Err, r.Inputs))
		}
	}
	Expect(bad).To(BeEmpty(), "%s", op)
	return compared
}

var _ = Describe("the convolutions' gradients on the cpu backend", Label("cpu"), func() {
	DescribeTable("match float64 finite differences over every golden geometry, ragged stride tails and padding beyond the kernel's span",
		func(op string, perDType int) { convCheck(op, perDType, nil) }, convEntries)

	DescribeTable("agree with torch.autograd over those geometries", Label("torch"),
		func(op string, perDType int) {
			vs := &gradients.Vs{Oracle: torchOn("cpu"), Target: differential.Target{Device: "cpu"}}
			Expect(convCheck(op, perDType, vs)).To(Equal(perDType*len(convDTypes)), "cases torch compared")
		}, convEntries)

	It("return the same gradient bits on every run", Label("conv1d", "conv2d"), func() {
		b := engine("cpu")
		cs, err := gradients.ConvCases([]string{"conv1d", "conv2d"}, convDTypes)
		Expect(err).NotTo(HaveOccurred())
		for _, c := range cs {
			first, err := gradients.Gradients(b, c)
			Expect(err).NotTo(HaveOccurred(), c.Name)
			prev := runtime.GOMAXPROCS(1)
			again, err := gradients.Gradients(b, c)
			runtime.GOMAXPROCS(prev)
			Expect(err).NotTo(HaveOccurred(), c.Name)
			Expect(harness.Digests(again)).To(Equal(harness.Digests(first)), c.Name)
		}
	})
})
