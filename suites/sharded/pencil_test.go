package sharded_test

import (
	"context"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/sharded"
)

// The sharded 2-D FFT by the pencil method (issue 26, item 6): one-rank bits, the float64
// definition's value within the f32 bound, the round trips, over 1 to 4 ranks in process and
// over tcp.
var _ = Describe("The pencil 2-D FFT", Label("cpu", "spectral"), func() {
	for _, p := range sharded.PencilCases() {
		It(p.Name()+" gives the one-rank bits and the float64 definition's value within the bound", func() {
			r, err := p.Run(cpu(), dist.Deterministic)
			Expect(err).NotTo(HaveOccurred())
			Expect(r.Problems()).To(BeEmpty(), "collectives %v, relative L2 %.3g against the definition, round trip %.3g, bound %.3g", r.Collectives, r.RefL2, r.TripL2, r.Bound)
			Expect(movesOnly(r.Outcome.Program)).To(BeTrue(), "collectives %v", r.Collectives)
			if p.RoundTrip() {
				Expect(r.TripL2).To(BeNumerically(">", 0), "a round trip that returns the input's exact bits did no arithmetic")
			}
		})
	}

	It("compiles fft2 of row blocks to the local FFT along the rows, one all_to_all to column blocks, the local FFT along the columns", func() {
		c, err := sharded.Pencil{Ops: []string{"fft2"}, Shape: []int{1024, 1024, 2}, DType: numerics.F32, World: 4, Dim: 0}.Case()
		Expect(err).NotTo(HaveOccurred())
		dp, err := c.Compile()
		Expect(err).NotTo(HaveOccurred())
		var ops, blocks []string
		for _, n := range dp.Graph.Nodes {
			ops = append(ops, n.Op)
			blocks = append(blocks, n.Inputs[0].Type.String())
			if n.Op == "all_to_all" {
				Expect([]int64{n.IntAttr("split_dim"), n.IntAttr("concat_dim")}).To(Equal([]int64{1, 0}))
			}
		}
		Expect(ops).To(Equal([]string{"fft", "all_to_all", "fft"}), graph.Print(dp.Graph))
		Expect(blocks).To(Equal([]string{"f32[256,1024,2]", "f32[256,1024,2]", "f32[1024,256,2]"}), "each FFT runs on whole lines of the rank's block")
		Expect(dp.Graph.Nodes[0].IntAttr("dim")).To(Equal(int64(-1)))
		Expect(dp.Graph.Nodes[2].IntAttr("dim")).To(Equal(int64(-2)))
		Expect(dp.Plan.Outputs[0].Layout.String()).To(Equal("[R,S(sp),R]"), "the result stays in column blocks")
	})

	It("gives the same bits over tcp ranks on loopback as in process and on one rank", func() {
		for _, p := range sharded.PencilCases() {
			if p.World < 2 || p.DType != numerics.F32 || p.Norm != "" || !(slices.Equal(p.Ops, []string{"fft2"}) || p.RoundTrip()) || len(p.Shape) != 3 {
				continue
			}
			r, err := p.Run(cpu(), dist.Deterministic)
			Expect(err).NotTo(HaveOccurred())
			c, err := p.Case()
			Expect(err).NotTo(HaveOccurred())
			ts, closeStore, err := sharded.TCPWorld(context.Background(), p.World, "pencil-"+strings.NewReplacer("/", "-", "=", "", "+", "-", "[", "", "]", "", ",", "-").Replace(p.Name()))
			Expect(err).NotTo(HaveOccurred())
			overTCP, err := c.RunOver(cpu(), dist.Deterministic, ts)
			closeStore()
			Expect(err).NotTo(HaveOccurred())
			for rk := range overTCP {
				Expect(sameBits(overTCP[rk], r.Outcome.Ranks[rk])).To(BeTrue(), "%s rank %d", p.Name(), rk)
			}
		}
	})

	It("gives the same bits in exact and fast mode: its collectives only move data", func() {
		p := sharded.Pencil{Ops: []string{"fft2", "ifft2"}, Shape: []int{12, 24, 2}, DType: numerics.F32, World: 3, Dim: 0, Seed: 5}
		det, err := p.Run(cpu(), dist.Deterministic)
		Expect(err).NotTo(HaveOccurred())
		for _, m := range []dist.Mode{dist.Exact, dist.Fast} {
			r, err := p.Run(cpu(), m)
			Expect(err).NotTo(HaveOccurred())
			Expect(sameBits(r.Outcome.Whole, det.Outcome.Whole)).To(BeTrue(), "mode %v", m)
		}
	})

	It("refuses a sharded dim the world does not divide with E_SHAPE naming the tensor, dim and axis", func() {
		for p, want := range map[*sharded.Pencil]string{
			{Ops: []string{"fft2"}, Shape: []int{10, 12, 2}, DType: numerics.F32, World: 3, Dim: 0}: "tensor x: dim 0 (size 10) is not divisible by mesh axis sp (size 3)",
			{Ops: []string{"rfft2"}, Shape: []int{12, 9}, DType: numerics.F32, World: 4, Dim: 1}:    "tensor x: dim 1 (size 9) is not divisible by mesh axis sp (size 4)",
		} {
			_, err := p.Run(cpu(), dist.Deterministic)
			Expect(err).To(HaveOccurred(), p.Name())
			Expect(errs.CodeOf(err)).To(Equal(errs.Shape), "%s: %v", p.Name(), err)
			Expect(err.Error()).To(ContainSubstring(want), p.Name())
		}
	})
})
