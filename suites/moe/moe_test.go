package moe_test

import (
	"context"
	"math"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/moe"
	"github.com/tessera-qa/tessera-qa/training"
)

const rtol, atol = 1e-5, 4e-5

func cfg(meshText string, unpadded bool, steps int) training.Config {
	b, err := backend.Get("cpu")
	Expect(err).NotTo(HaveOccurred())
	opt, err := training.NewOptimizer("adamw", 1e-2, b)
	Expect(err).NotTo(HaveOccurred())
	c := training.Config{Model: training.MoEModel, Steps: steps, Seed: 1, Backend: b, Optimizer: opt, MoEUnpadded: unpadded}
	if meshText != "" {
		c.Mesh, err = mesh.ParseMesh(meshText)
		Expect(err).NotTo(HaveOccurred())
	}
	return c
}

func step(c training.Config, edit func(map[string]*tensor.Tensor)) *training.StepOutcome {
	o, err := training.FirstStepWith(context.Background(), c, edit)
	Expect(err).NotTo(HaveOccurred())
	return o
}

// zeroRouter makes every router score equal: exact ties everywhere.
func zeroRouter(p map[string]*tensor.Tensor) { p["wr"] = tensor.New(p["wr"].DType, p["wr"].Shape) }

func sameAsOneRank(got, one *training.StepOutcome, what string) {
	l, e := got.Loss.Float64(0), one.Loss.Float64(0)
	Expect(math.Abs(l-e)).To(BeNumerically("<=", atol+rtol*math.Abs(e)), "%s: loss %v, one rank %v", what, l, e)
	d, err := training.CompareGrads(one.Grads[0], got.Grads, rtol, atol)
	Expect(err).NotTo(HaveOccurred())
	Expect(d.Violates).To(BeEmpty(), "%s: max |diff| %g at %s", what, d.MaxAbs, d.Worst)
}

var _ = Describe("mixture-of-experts training", func() {
	one := func() *training.StepOutcome { return step(cfg("", false, 1), nil) }

	It("gives one rank's loss and expert, router and aux gradients on every ep (and dp) size, padded or not", func() {
		ref := one()
		// The magnitude guard (design.md §7): the expert gradients are far above atol.
		Expect(training.GradNorm(ref)).To(BeNumerically(">", 1000*atol))
		for _, c := range []struct {
			mesh     string
			unpadded bool
		}{{"dp=2,ep=4", false}, {"dp=2,ep=4", true}, {"ep=2", false}, {"ep=4", true}, {"dp=4,ep=2", false}, {"dp=8", false}} {
			sameAsOneRank(step(cfg(c.mesh, c.unpadded, 1), nil), ref, c.mesh)
		}
	})

	It("matches an independent float64 reference: the loss, and every 37th gradient element by central differences (dp=2,ep=4)", func() {
		got := step(cfg("dp=2,ep=4", false, 1), nil)
		d := training.DefaultMoE
		params := moe.Float64s(training.MoEInit(d, numerics.F32, 1))
		x, t := training.MoEBatch(d, numerics.F32, 1, 1, 0, 1)
		want := moe.Loss(d, params, x.Float64s(), t.Float64s())
		Expect(math.Abs(got.Loss.Float64(0) - want)).To(BeNumerically("<=", rtol*math.Abs(want)))
		grads := map[string]*tensor.Tensor{} // each parameter from a rank that holds it
		for _, gs := range got.Grads {
			for k, v := range gs {
				grads[k] = v
			}
		}
		for _, p := range moe.CentralDifferences(d, params, x.Float64s(), t.Float64s(), grads, 37, 1e-4) {
			Expect(math.Abs(p.Numerical-p.Engine)).To(BeNumerically("<=", 2e-5+1e-3*math.Abs(p.Numerical)), "%s[%d]", p.Param, p.Index)
		}
	})

	It("never gives an expert more tokens than its capacity, drops the overflow, and agrees padded and unpadded", func() {
		padded, unpadded := step(cfg("dp=2,ep=4", false, 1), nil), step(cfg("dp=2,ep=4", true, 1), nil)
		d := training.DefaultMoE
		C := training.Capacity(d.GroupTokens, d.Experts, d.TopK, d.CapacityFactor)
		dropped := 0
		for r, rs := range padded.Routing {
			Expect(moe.SameRouting(rs, unpadded.Routing[r])).To(BeEmpty())
			for _, g := range rs {
				kept := make([]int, d.Experts)
				for _, cs := range g.Choices {
					for _, c := range cs {
						if c.Slot < 0 {
							dropped++
							continue
						}
						Expect(c.Slot).To(BeNumerically("<", C))
						kept[c.Expert]++
					}
				}
				Expect(g.Count).To(Equal(kept))
				for _, n := range g.Count {
					Expect(n).To(BeNumerically("<=", C))
				}
			}
		}
		Expect(dropped).To(BeNumerically(">", 0), "capacity factor 1 must drop some tokens, or the check is idle")
		Expect(padded.Loss.Data).To(Equal(unpadded.Loss.Data))
		d2, err := training.CompareGrads(gather(padded), unpadded.Grads, rtol, atol)
		Expect(err).NotTo(HaveOccurred())
		Expect(d2.Violates).To(BeEmpty())
	})

	It("routes exact ties as engine/ref does on every rank, and works when a rank's experts receive no token", func() {
		d := training.DefaultMoE
		ref := step(cfg("", false, 1), zeroRouter)
		for _, unpadded := range []bool{false, true} {
			got := step(cfg("dp=2,ep=4", unpadded, 1), zeroRouter)
			for r, rs := range got.Routing {
				want, err := moe.RefRouting(d, numerics.F32, 1, tensor.New(numerics.F32, []int{d.Width, d.Experts}), r, 8)
				Expect(err).NotTo(HaveOccurred())
				Expect(moe.SameRouting(rs, want)).To(BeEmpty(), "rank %d", r)
				for _, g := range rs {
					Expect(g.Count[2]+g.Count[3]).To(BeZero(), "all scores equal: top-2 is experts 0 and 1")
				}
			}
			// Ranks at ep 2 and 3 hold experts 2 and 3, which got nothing: zero gradients.
			for _, gs := range got.Grads {
				for _, n := range []string{"w1_2", "w2_2", "w1_3", "w2_3"} {
					if g, ok := gs[n]; ok {
						Expect(g.Float64s()).To(HaveEach(BeZero()))
					}
				}
			}
			sameAsOneRank(got, ref, "zero router")
		}
	})

	It("restores the input and its gradient by dispatch then combine with equal weights 1/k (no drops), padded or not", func() {
		for _, unpadded := range []bool{false, true} {
			c := cfg("dp=2,ep=4", unpadded, 1)
			c.MoE = training.DefaultMoE
			c.MoE.CapacityFactor = float64(c.MoE.Experts) / float64(c.MoE.TopK) // capacity = group size
			x, y, dy, dx, err := training.RoundTrip(context.Background(), c)
			Expect(err).NotTo(HaveOccurred())
			for r := range x {
				Expect(y[r].Data).To(Equal(x[r].Data), "rank %d: combine(dispatch(x))", r)
				Expect(dx[r].Data).To(Equal(dy[r].Data), "rank %d: the gradient back through both", r)
				Expect(training.GradNorm(&training.StepOutcome{Grads: []map[string]*tensor.Tensor{{"x": x[r]}}})).To(BeNumerically(">", 1))
			}
		}
	})

	It("repeats its bits run after run and over tcp as in process (dp=2,ep=4, 3 steps)", func() {
		ctx := context.Background()
		a, err := training.Inproc(ctx, cfg("dp=2,ep=4", false, 3), 8)
		Expect(err).NotTo(HaveOccurred())
		b, err := training.Inproc(ctx, cfg("dp=2,ep=4", false, 3), 8)
		Expect(err).NotTo(HaveOccurred())
		c, err := training.Loopback(ctx, cfg("dp=2,ep=4", true, 3), 8)
		Expect(err).NotTo(HaveOccurred())
		for _, r := range []*training.Result{b, c} {
			Expect(r.Digest).To(Equal(a.Digest))
			for i := range a.Losses {
				Expect(r.Losses[i].Bits).To(Equal(a.Losses[i].Bits))
			}
		}
		Expect(a.Losses[2].Value).To(BeNumerically("<", a.Losses[0].Value), "it learns")
	})
})

// gather is every parameter's gradient from a rank that holds it, as one rank's map.
func gather(o *training.StepOutcome) map[string]*tensor.Tensor {
	out := map[string]*tensor.Tensor{}
	for _, gs := range o.Grads {
		for k, v := range gs {
			out[k] = v
		}
	}
	return out
}
