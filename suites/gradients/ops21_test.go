package gradients_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/gradients"
)

// Issue 21's attribute forms, beyond the PerPair cases the tables above draw per op: the
// golden specs of each form in f64 and f32, against float64 finite differences and against
// torch.autograd (trunc and floor division: zero for both operands, as torch 1.13 gives).
var ops21Entries = []TableEntry{
	Entry("div rounding_mode trunc", "div", "trunc-"),
	Entry("div rounding_mode floor", "div", "floor-"),
	Entry("reduce_sum axes=[] and scalar dims", "reduce_sum", "5x7x3-axes[]", "scalar-"),
	Entry("reduce_mean axes=[] and scalar dims", "reduce_mean", "5x7x3-axes[]", "scalar-"),
	Entry("reduce_max axes=[] and scalar dims", "reduce_max", "5x7x3-axes[]", "scalar-"),
	Entry("softmax of a scalar", "softmax", "scalar-"),
	Entry("mse_loss reduction sum and none", "mse_loss", "7x13-sum", "3x1031-sum", "7x13-none"),
}

func ops21Check(op string, vs *gradients.Vs, tags []string) (compared int) {
	cs, err := gradients.CasesTagged(op, []numerics.DType{numerics.F64, numerics.F32}, tags...)
	Expect(err).NotTo(HaveOccurred())
	Expect(len(cs)).To(BeNumerically(">=", 2), "no golden cases of %s %v", op, tags)
	var bad []string
	rows := 0
	for _, r := range floatRows(gradients.CheckAll(engine("cpu"), cs, gradients.Options{Vs: vs}), op) {
		if r.DType != "f64" && r.DType != "f32" {
			continue // the report lists every float dtype of the op; only these two were drawn
		}
		rows++
		GinkgoWriter.Printf("%s %s %v: %s, %d cases, worst %.2g of %.2g; oracle %s, %d compared %s\n",
			op, r.DType, tags, r.Verdict, r.Cases, r.Worst, r.Budget, r.Vs, r.VsCompared, r.VsReason)
		compared += r.VsCompared
		if r.Verdict != gradients.Pass {
			bad = append(bad, r.DType+": "+r.Reason+" "+r.VsReason)
		}
	}
	Expect(bad).To(BeEmpty(), "%s %v", op, tags)
	Expect(rows).To(Equal(2), "rows of f64 and f32")
	return compared
}

var _ = Describe("issue 21's attribute forms on the cpu backend", Label("cpu"), func() {
	DescribeTable("have the gradient of float64 finite differences",
		func(op string, tags ...string) { ops21Check(op, nil, tags) }, ops21Entries)
	DescribeTable("agree with torch.autograd", Label("torch"),
		func(op string, tags ...string) {
			vs := &gradients.Vs{Oracle: torchOn("cpu"), Target: differential.Target{Device: "cpu"}}
			Expect(ops21Check(op, vs, tags)).To(BeNumerically(">", 0), "torch compared no case of %s %v", op, tags)
		}, ops21Entries)
})
