package gradients_test

import (
	"fmt"
	"github.com/tessera-qa/tessera-qa/engine/compiler/ptx"
	"runtime"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/engine/autodiff"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/gradients"
	"github.com/tessera-qa/tessera-qa/harness"
)

// setup is one engine backend with the device torch computes on beside it.
type setup struct {
	backend, device string
	labels          Labels
}

var setups = []setup{
	{"cpu", "cpu", Label("cpu")},
	{"cuda", "cuda", Label("gpu", "nightly")},
}

// opEntries is one table entry per registry op (collectives aside) that has a gradient, so
// that a failure names its op.
func opEntries() []TableEntry {
	var out []TableEntry
	for _, d := range graph.Ops() {
		if ok, _ := autodiff.Differentiable(d.Name); ok {
			out = append(out, Entry(d.Name, Label(d.Name), d.Name))
		}
	}
	return out
}

// transposes is each differentiable collective with the collective its gradient is.
var transposes = []TableEntry{
	Entry("all_reduce into all_reduce", "all_reduce", "all_reduce"),
	Entry("all_gather into reduce_scatter", "all_gather", "reduce_scatter"),
	Entry("reduce_scatter into all_gather", "reduce_scatter", "all_gather"),
	Entry("all_to_all into all_to_all with the dims swapped", "all_to_all", "all_to_all"),
}

// floatRows returns the gradcheck rows of op's float dtypes.
func floatRows(results []gradients.Result, op string) []gradients.Row {
	var out []gradients.Row
	for _, r := range gradients.Rows(results, []string{op}) {
		if dt, err := numerics.Parse(r.DType); err == nil && dt.IsFloat() {
			out = append(out, r)
		}
	}
	return out
}

// runs says whether backend can run op: on cuda, the ops the code generator lowers.
func runs(backend, op string) bool {
	d, ok := graph.Lookup(op)
	return !ok || backend != "cuda" || ptx.Lowers(d)
}

// skipNotLowered skips a spec of an op backend cannot run, with the code generator's reason.
func skipNotLowered(backend, op string) {
	if !runs(backend, op) {
		Skip(fmt.Sprintf("op %s %s (a declared gap: tessera-qa ops --coverage)", op, ptx.NotLowered))
	}
}

var _ = func() bool {
	for _, s := range setups {
		Describe("on the "+s.backend+" backend", s.labels, func() {
			DescribeTable("gives every differentiable op the gradient of float64 finite differences, in every float dtype",
				func(op string) {
					b := engine(s.backend)
					skipNotLowered(s.backend, op)
					cs, err := gradients.Cases([]string{op})
					Expect(err).NotTo(HaveOccurred())
					rows := floatRows(gradients.CheckAll(b, cs, gradients.Options{}), op)
					Expect(rows).NotTo(BeEmpty(), "%s declares no float dtype", op)
					var bad []string
					for _, r := range rows {
						GinkgoWriter.Printf("%s %s: %s, %d cases, worst %.2g of %.2g\n", op, r.DType, r.Verdict, r.Cases, r.Worst, r.Budget)
						if r.Verdict != gradients.Pass {
							bad = append(bad, r.DType+": "+r.Reason)
						}
					}
					Expect(bad).To(BeEmpty(), "%s on %s", op, s.backend)
				}, opEntries())

			DescribeTable("agrees with torch.autograd", Label("torch"),
				func(op string) {
					b := engine(s.backend)
					skipNotLowered(s.backend, op)
					o := torchOn(s.device)
					cs, err := gradients.Cases([]string{op})
					Expect(err).NotTo(HaveOccurred())
					vs := &gradients.Vs{Oracle: o, Target: differential.Target{Device: s.device}}
					rows := floatRows(gradients.CheckAll(b, cs, gradients.Options{Vs: vs}), op)
					var bad, unsupported []string
					compared := 0
					for _, r := range rows {
						GinkgoWriter.Printf("%s %s vs %s on %s: %s, %d compared, worst %.2g of %.2g %s\n",
							op, r.DType, o.Describe(), s.device, r.Vs, r.VsCompared, r.VsWorst, r.Budget, r.VsReason)
						compared += r.VsCompared
						switch r.Vs {
						case gradients.OracleFail, gradients.OracleError:
							bad = append(bad, r.DType+": "+r.VsReason)
						case gradients.OracleUnsupported:
							unsupported = append(unsupported, r.DType+": "+r.VsReason)
						}
					}
					Expect(bad).To(BeEmpty(), "%s on %s against %s on %s", op, s.backend, o.Describe(), s.device)
					if compared == 0 {
						Skip("torch computed no case of " + op + ": " + strings.Join(unsupported, "; "))
					}
					if len(unsupported) > 0 {
						AddReportEntry("not compared", strings.Join(unsupported, "; "))
					}
				}, opEntries())

			DescribeTable("differentiates collectives into their transpose collectives over a mesh",
				func(op, transpose string) {
					b := engine(s.backend)
					cs, err := gradients.MeshCases([]string{op})
					Expect(err).NotTo(HaveOccurred())
					Expect(cs).NotTo(BeEmpty(), "no float case of %s in golden's DistCatalogue", op)
					for _, c := range cs {
						vg, err := autodiff.VJP(c.Graph)
						Expect(err).NotTo(HaveOccurred(), c.Name)
						Expect(backwardHas(c.Graph, vg, op, transpose)).To(BeTrue(),
							"%s: the backward has no %s transposing the forward's %s:\n%s", c.Name, transpose, op, graph.Print(vg))
						r := gradients.CheckMesh(b, c)
						Expect(r.Pass).To(BeTrue(), "%s on %s: %s %+v", c.Name, s.backend, r.Err, r.Inputs)
					}
				}, transposes)

			It("returns the same gradient bits on every run", func() {
				b := engine(s.backend)
				cs, err := gradients.Cases(nil)
				Expect(err).NotTo(HaveOccurred())
				var differ []string
				for _, c := range cs {
					if ok, _ := autodiff.Differentiable(c.Op); !ok || !runs(s.backend, c.Op) {
						continue
					}
					first, err := gradients.Gradients(b, c)
					Expect(err).NotTo(HaveOccurred(), c.Name)
					prev := runtime.GOMAXPROCS(1) // another schedule of the host's threads
					again, err := gradients.Gradients(b, c)
					runtime.GOMAXPROCS(prev)
					Expect(err).NotTo(HaveOccurred(), c.Name)
					if a, z := harness.Digests(first), harness.Digests(again); !equal(a, z) {
						differ = append(differ, fmt.Sprintf("%s: %v then %v", c.Name, a, z))
					}
				}
				ms, err := gradients.MeshCases(nil)
				Expect(err).NotTo(HaveOccurred())
				for _, c := range ms {
					first, err := gradients.MeshGradients(b, c)
					Expect(err).NotTo(HaveOccurred(), c.Name)
					again, err := gradients.MeshGradients(b, c)
					Expect(err).NotTo(HaveOccurred(), c.Name)
					for r := range first {
						if a, z := harness.Digests(first[r]), harness.Digests(again[r]); !equal(a, z) {
							differ = append(differ, fmt.Sprintf("%s rank %d: %v then %v", c.Name, r, a, z))
						}
					}
				}
				Expect(differ).To(BeEmpty(), "gradients whose bits changed between two runs on %s", s.backend)
				GinkgoWriter.Printf("%d single-device and %d mesh cases repeated bit for bit on %s\n", len(cs), len(ms), s.backend)
			})
		})
	}
	return true
}()

var _ = Describe("ops without a gradient", Label("cpu"), func() {
	It("refuses an op without a gradient with E_UNSUPPORTED naming the node", func() {
		// attention_grad inside the graph being differentiated (no second derivatives)
		b := graph.NewBuilder("second_order")
		q, k, v := b.Input("q", numerics.F32, 2, 4), b.Input("k", numerics.F32, 3, 4), b.Input("v", numerics.F32, 3, 4)
		do := b.Input("do", numerics.F32, 2, 4)
		o := b.Op("attention", nil, q, k, v)
		lse := b.Op("attention_lse", nil, q, k)
		dq := b.Named("dq", "attention_grad", graph.Attrs{"wrt": graph.String("q")}, q, k, v, o, do, lse)
		b.Output(b.Named("loss", "reduce_sum", graph.Attrs{"axes": graph.Ints(0, 1)}, dq))
		g, err := b.Build()
		Expect(err).NotTo(HaveOccurred())
		_, err = autodiff.Grad(g, "loss", "q")
		Expect(errs.CodeOf(err)).To(Equal(errs.Unsupported), "%v", err)
		Expect(err.Error()).To(ContainSubstring("node %dq"))
		Expect(err.Error()).To(ContainSubstring("attention_grad has no gradient"))

		// chunk over a mesh (its transpose needs a rank-dependent op)
		m, err := mesh.ParseMesh("dp=2")
		Expect(err).NotTo(HaveOccurred())
		b = graph.NewBuilder("chunked")
		b.Mesh(m)
		x := b.Input("x", numerics.F32, 4, 3)
		b.Output(b.Named("part", "chunk", graph.Attrs{"axis": graph.String("dp"), "dim": graph.Int(0)}, x))
		g, err = b.Build()
		Expect(err).NotTo(HaveOccurred())
		_, err = autodiff.VJP(g)
		Expect(errs.CodeOf(err)).To(Equal(errs.Unsupported), "%v", err)
		Expect(err.Error()).To(ContainSubstring("node %part"))
		Expect(err.Error()).To(ContainSubstring("chunk has no gradient"))
	})

	It("says why for every op of the registry without a gradient", func() {
		var none []string
		for _, d := range append(graph.Ops(), graph.CollectiveOps()...) {
			ok, why := autodiff.Differentiable(d.Name)
			if ok {
				continue
			}
			none = append(none, d.Name)
			Expect(why).NotTo(BeEmpty(), d.Name)
			Expect(why).NotTo(Equal("no gradient rule"), "%s has no gradient and no reason", d.Name)
		}
		GinkgoWriter.Printf("without a gradient: %s\n", strings.Join(none, ", "))
		Expect(none).To(ConsistOf("attention_lse", "attention_grad", "broadcast", "chunk", "send", "recv", "scaled_matmul"))
	})
})

// backwardHas reports whether the nodes VJP appended to fwd include the transpose collective of
// fwd's op: for all_to_all, one with split_dim and concat_dim swapped.
func backwardHas(fwd, vg *graph.Graph, op, transpose string) bool {
	var f *graph.Node
	for _, n := range fwd.Nodes {
		if n.Op == op {
			f = n
		}
	}
	if f == nil {
		return false
	}
	for _, n := range vg.Nodes[len(fwd.Nodes):] {
		if n.Op != transpose || n.StringAttr("axis") != f.StringAttr("axis") {
			continue
		}
		if op != "all_to_all" || (n.IntAttr("split_dim") == f.IntAttr("concat_dim") && n.IntAttr("concat_dim") == f.IntAttr("split_dim")) {
			return true
		}
	}
	return false
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
