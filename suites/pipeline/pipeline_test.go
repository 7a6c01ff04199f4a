package pipeline_test

import (
	"context"
	"math"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/all"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/dist/pipeline"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/training"
)

// PyTorch's pipeline schedule tests compare with the unpipelined model at these (f32).
const rtol, atol = 1e-5, 4e-5

// cfg is a run of model on meshText ("" for one rank) at the size of a pp=4, 8 micro-batch run.
func cfg(model, meshText, schedule string, micro, steps int) training.Config {
	b, err := backend.Get("cpu")
	Expect(err).NotTo(HaveOccurred())
	opt, err := training.NewOptimizer("adamw", 1e-2, b)
	Expect(err).NotTo(HaveOccurred())
	c := training.Config{Model: model, Dims: training.PipelineDims(model, 1, 8), Steps: steps, Seed: 1, Backend: b, Optimizer: opt,
		Schedule: schedule, MicroBatches: micro}
	if meshText != "" {
		c.Mesh, err = mesh.ParseMesh(meshText)
		Expect(err).NotTo(HaveOccurred())
	}
	return c
}

func firstStep(c training.Config) *training.StepOutcome {
	o, err := training.FirstStep(context.Background(), c)
	Expect(err).NotTo(HaveOccurred())
	return o
}

var _ = Describe("pipeline-parallel training", func() {
	unpipelined := map[string]*training.StepOutcome{}
	ref := func(model string) *training.StepOutcome {
		if unpipelined[model] == nil {
			unpipelined[model] = firstStep(cfg(model, "", "", 0, 1))
		}
		return unpipelined[model]
	}

	for _, c := range []struct{ model, mesh, schedule string }{
		{"transformer-block", "pp=4", pipeline.OneFOneB},
		{"transformer-block", "pp=4", pipeline.GPipe},
		{"transformer-block", "pp=4", pipeline.Interleaved},
		{"mlp", "dp=2,pp=2", pipeline.OneFOneB},
	} {
		It("gives the unpipelined run's loss and every rank's gradients: "+c.model+" on "+c.mesh+" with "+c.schedule+", 8 micro-batches", func() {
			got, want := firstStep(cfg(c.model, c.mesh, c.schedule, 8, 1)), ref(c.model)
			l, e := got.Loss.Float64(0), want.Loss.Float64(0)
			Expect(math.Abs(l-e)).To(BeNumerically("<=", atol+rtol*math.Abs(e)), "loss %v, unpipelined %v", l, e)
			d, err := training.CompareGrads(want.Grads[0], got.Grads, rtol, atol)
			Expect(err).NotTo(HaveOccurred())
			Expect(d.Violates).To(BeEmpty(), "max |diff| %g at %s", d.MaxAbs, d.Worst)
			// The magnitude guard (design.md §7): the gradients are far above atol.
			Expect(training.GradNorm(want)).To(BeNumerically(">", 1000*atol))
			// The bubble, in virtual time (unit-cost stage passes), is the formula's.
			p := got.Pipeline
			Expect(p.Bubble).To(BeNumerically("~", pipeline.FormulaBubble(p.Schedule, p.Ranks, p.MicroBatches, p.Chunks), 1e-9))
		})
	}

	It("has a gradient norm that does not change with the micro-batches, the accumulation steps or the pp size", func() {
		base := training.GradNorm(ref("transformer-block"))
		for _, c := range []struct {
			mesh  string
			micro int
		}{
			{"pp=1", 1}, {"pp=1", 4}, {"pp=1", 8}, // one stage: micro-batches are gradient accumulation steps
			{"pp=2", 2}, {"pp=2", 8}, {"pp=4", 4}, {"pp=4", 8}, {"dp=2,pp=2", 4},
		} {
			n := training.GradNorm(firstStep(cfg("transformer-block", c.mesh, pipeline.OneFOneB, c.micro, 1)))
			Expect(math.Abs(n-base)/base).To(BeNumerically("<=", rtol), "%s with %d micro-batches: norm %v, unpipelined %v", c.mesh, c.micro, n, base)
		}
	})

	It("repeats its bits run after run, over tcp as in process, and in 1F1B as in GPipe", func() {
		ctx := context.Background()
		run := func(schedule string, tcp bool) *training.Result {
			c := cfg("transformer-block", "pp=4", schedule, 8, 3)
			var r *training.Result
			var err error
			if tcp {
				r, err = training.Loopback(ctx, c, 4)
			} else {
				r, err = training.Inproc(ctx, c, 4)
			}
			Expect(err).NotTo(HaveOccurred())
			Expect(r.Losses).To(HaveLen(3))
			return r
		}
		a := run(pipeline.OneFOneB, false)
		for _, b := range []*training.Result{run(pipeline.OneFOneB, false), run(pipeline.OneFOneB, true), run(pipeline.GPipe, true)} {
			Expect(b.Digest).To(Equal(a.Digest))
			for i := range a.Losses {
				Expect(b.Losses[i].Bits).To(Equal(a.Losses[i].Bits), "step %d", i+1)
			}
		}
		Expect(a.Losses[2].Value).To(BeNumerically("<", a.Losses[0].Value), "it learns")
	})

	It("refuses a deadlocking schedule before it runs, naming the ranks and their actions", func() {
		// Rank 0 waits for micro-batch 0's gradient before sending its activations.
		plan := &pipeline.Plan{Name: "recv-first", Ranks: 2, Micro: 1, Chunks: 1, Lists: [][]pipeline.Action{
			{{Kind: pipeline.RecvB, Stage: 0, MB: 0, Peer: 1}, {Kind: pipeline.Forward, Stage: 0, MB: 0}, {Kind: pipeline.SendF, Stage: 0, MB: 0, Peer: 1}, {Kind: pipeline.Backward, Stage: 0, MB: 0}},
			{{Kind: pipeline.RecvF, Stage: 1, MB: 0, Peer: 0}, {Kind: pipeline.Forward, Stage: 1, MB: 0}, {Kind: pipeline.Backward, Stage: 1, MB: 0}, {Kind: pipeline.SendB, Stage: 1, MB: 0, Peer: 0}},
		}}
		_, err := pipeline.Simulate(plan)
		Expect(errs.CodeOf(err)).To(Equal(errs.Deadlock))
		Expect(err.Error()).To(ContainSubstring("rank 0 at entry 0 RECV_B(mb0,s0<-r1)"))
		Expect(err.Error()).To(ContainSubstring("rank 1 at entry 0 RECV_F(mb0,s1<-r0)"))
	})
})
