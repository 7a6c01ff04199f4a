package sharded_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/dtensor"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/dist/run"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/sharded"
)

func cpu() backend.Backend {
	be, err := backend.Get("cpu")
	Expect(err).NotTo(HaveOccurred())
	return be
}

// expectClose checks every output with the harness comparator under tolerance tol(dtype).
func expectClose(what string, got, want []*tensor.Tensor, tol func(numerics.DType) harness.Tolerance) {
	Expect(got).To(HaveLen(len(want)))
	for i := range want {
		r := harness.Check(got[i], want[i], tol(want[i].DType))
		Expect(r.Pass).To(BeTrue(), "%s, output %d: %s (max abs %g, max rel %g)", what, i, r.Reason, r.MaxAbs, r.MaxRel)
	}
}

func sameBits(a, b []*tensor.Tensor) bool {
	for i := range a {
		if !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return len(a) == len(b)
}

// movesOnly reports whether a rank program's collectives only move data (no sums): then the
// sharded run computes every element exactly as one device does.
func movesOnly(dp *compiler.DistProgram) bool {
	for _, c := range sharded.Collectives(dp) {
		if strings.HasPrefix(c, "all_reduce") || strings.HasPrefix(c, "reduce_scatter") {
			return false
		}
	}
	return true
}

var _ = Describe("Sharded execution of catalogue graphs", Label("cpu"), func() {
	cases, err := sharded.Cases()
	if err != nil {
		panic(err)
	}
	for _, c := range cases {
		Describe(c.Name, Ordered, func() {
			var first, second *sharded.Outcome
			BeforeAll(func() {
				var err error
				first, err = c.Run(cpu(), dist.Deterministic)
				Expect(err).NotTo(HaveOccurred())
				second, err = c.Run(cpu(), dist.Deterministic)
				Expect(err).NotTo(HaveOccurred())
			})
			It("agrees with the graph on one device within tolerance", func() {
				expectClose("assembled vs one device", first.Whole, first.Single, c.Tolerance)
			})
			It("agrees with the golden model of the rank program on every rank", func() {
				for r := range first.Ranks {
					expectClose("rank vs ref.RunDist", first.Ranks[r], first.Ref[r], c.Tolerance)
				}
			})
			It("gives the same bits on every run", func() {
				for r := range first.Ranks {
					Expect(sameBits(first.Ranks[r], second.Ranks[r])).To(BeTrue(), "rank %d", r)
				}
			})
			It("gives the one device's bits when its collectives only move data", func() {
				if !movesOnly(first.Program) {
					Skip("the program sums over ranks: " + strings.Join(sharded.Collectives(first.Program), " "))
				}
				Expect(sameBits(first.Whole, first.Single)).To(BeTrue(), "collectives %v", sharded.Collectives(first.Program))
			})
		})
	}

	It("gives the same bits over tcp ranks on loopback as over in-process ranks", func() {
		for _, c := range cases {
			switch c.Name {
			case "mlp/dp-tp/dp=2,tp=2", "matmul/tp-row/tp=4", "attention/tp-heads/tp=4", "layernorm/tp-hidden/tp=4":
			default:
				continue
			}
			inproc, err := c.Run(cpu(), dist.Deterministic)
			Expect(err).NotTo(HaveOccurred())
			ts, closeStore, err := sharded.TCPWorld(context.Background(), len(inproc.Ranks), "sharded-"+strings.NewReplacer("/", "-", "=", "", ",", "-").Replace(c.Name))
			Expect(err).NotTo(HaveOccurred())
			overTCP, err := c.RunOver(cpu(), dist.Deterministic, ts)
			closeStore()
			Expect(err).NotTo(HaveOccurred())
			for r := range overTCP {
				Expect(sameBits(overTCP[r], inproc.Ranks[r])).To(BeTrue(), "%s rank %d", c.Name, r)
			}
		}
	})

	It("shards a tensor-parallel run of the MLP with one all_reduce after the row-parallel matmul", func() {
		for _, c := range cases {
			if c.Name == "mlp/tp/tp=4" {
				dp, err := c.Compile()
				Expect(err).NotTo(HaveOccurred())
				Expect(sharded.Collectives(dp)).To(Equal([]string{"all_reduce:tp"}))
				return
			}
		}
		Fail("case mlp/tp/tp=4 missing")
	})

	It("all_reduce nodes in exact mode give the same bits whatever the number of ranks the addends are spread over", func() {
		// One multiset of addends with heavy cancellation, spread over 1, 2 and 4 ranks so that
		// the exact sum is the same: exact mode rounds that sum once, so the bits agree.
		v := float64(float32(1e-3))
		spreads := map[int][]float64{1: {float64(float32(1 + v))}, 2: {1, v}, 4: {1e8, 1, -1e8, v}}
		var digests []string
		for _, n := range []int{1, 2, 4} {
			m, err := mesh.ParseMesh(fmt.Sprintf("tp=%d", n))
			Expect(err).NotTo(HaveOccurred())
			b := graph.NewBuilder("sum")
			b.Mesh(m)
			b.Output(b.Op("all_reduce", graph.Attrs{"axis": graph.String("tp")}, b.Input("x", numerics.F32, 3)))
			g, err := b.Build()
			Expect(err).NotTo(HaveOccurred())
			dp, err := compiler.CompileDist(g, compiler.Options{})
			Expect(err).NotTo(HaveOccurred())
			ins := make([]map[string]*tensor.Tensor, n)
			for r, a := range spreads[n] {
				ins[r] = map[string]*tensor.Tensor{"x": tensor.FromFloat64(numerics.F32, []int{3}, []float64{a, a, a})}
			}
			outs, err := run.Inproc(context.Background(), dp, cpu(), dist.Options{Mode: dist.Exact}, ins)
			Expect(err).NotTo(HaveOccurred())
			for r := range outs {
				Expect(outs[r][0].Digest()).To(Equal(outs[0][0].Digest()))
			}
			digests = append(digests, outs[0][0].Digest())
		}
		Expect(digests[1]).To(Equal(digests[0]))
		Expect(digests[2]).To(Equal(digests[0]))
	})
})

var _ = Describe("The seeds' mesh examples through the Go API", Label("cpu"), func() {
	It("all-reduces a replicated [1.0] over a 4-device dp mesh to [4.0] on every rank", func() {
		m, err := mesh.ParseMesh("dp=4")
		Expect(err).NotTo(HaveOccurred())
		Expect(m.Devices).To(Equal([]string{"cpu:0", "cpu:1", "cpu:2", "cpu:3"}))
		b := graph.NewBuilder("seed_all_reduce")
		b.Mesh(m)
		x := b.Input("x", numerics.F32, 1)
		b.Output(b.Op("all_reduce", graph.Attrs{"axis": graph.String("dp"), "op": graph.String("sum")}, x))
		g, err := b.Build()
		Expect(err).NotTo(HaveOccurred())
		dp, err := compiler.CompileDist(g, compiler.Options{})
		Expect(err).NotTo(HaveOccurred())
		one := map[string]*tensor.Tensor{"x": tensor.FromFloat64(numerics.F32, []int{1}, []float64{1})}
		outs, err := run.Inproc(context.Background(), dp, cpu(), dist.Options{}, []map[string]*tensor.Tensor{one, one, one, one})
		Expect(err).NotTo(HaveOccurred())
		for r := range outs {
			Expect(outs[r][0].Float64s()).To(Equal([]float64{4}), "rank %d", r)
		}
	})

	It("shards an 8192x8192 bf16 weight by columns over tp on a 4x2 dp x tp mesh", func() {
		m, err := mesh.ParseMesh("dp=4,tp=2")
		Expect(err).NotTo(HaveOccurred())
		Expect(m.World()).To(Equal(8))
		w, err := mesh.ParseLayout("col:tp", 2)
		Expect(err).NotTo(HaveOccurred())
		Expect(w.String()).To(Equal("[R,S(tp)]"))
		local, err := m.LocalShape("W", w, []int{8192, 8192})
		Expect(err).NotTo(HaveOccurred())
		Expect(local).To(Equal([]int{8192, 4096}))
		for r := range 8 {
			Expect(m.Offset(w, []int{8192, 8192}, r)).To(Equal([]int{0, 4096 * m.Coord("tp", r)}))
		}
		// The matmul with an f32 accumulator: column-parallel needs no collective, and the
		// rank program keeps the accumulation policy.
		g := seedMatmul(8192, 64)
		dp, err := compiler.CompileDist(g, compiler.Options{Mesh: m, Layouts: map[string]mesh.Layout{"W": w, "x": mustLayout("[S(dp),R]", 2)}})
		Expect(err).NotTo(HaveOccurred())
		Expect(sharded.Collectives(dp)).To(BeEmpty())
		Expect(dp.Plan.Inputs[1].Local.String()).To(Equal("bf16[8192,4096]"))
		Expect(dp.Plan.Outputs[0].Layout.String()).To(Equal("[S(dp),S(tp)]"))
		mm := dp.Graph.Nodes[slices.IndexFunc(dp.Graph.Nodes, func(n *graph.Node) bool { return n.Op == "matmul" })]
		Expect(mm.DTypeAttr("accum")).To(Equal(numerics.F32))
	})

	It("runs the same layout scaled down (64x64 bf16, 8 ranks) within bf16 tolerance of one device", func() {
		m, err := mesh.ParseMesh("dp=4,tp=2")
		Expect(err).NotTo(HaveOccurred())
		g := seedMatmul(64, 8)
		c := sharded.Case{Name: "seed/dp-tp", Graph: g, Mesh: m.String(), Layouts: map[string]string{"W": "col:tp", "x": "[S(dp),R]"}, K: 64, Seed: 8192}
		o, err := c.Run(cpu(), dist.Deterministic)
		Expect(err).NotTo(HaveOccurred())
		expectClose("8 ranks vs one device", o.Whole, o.Single, c.Tolerance)
		Expect(sameBits(o.Whole, o.Single)).To(BeTrue(), "column-parallel moves no sums, so the bits are one device's")
	})

	It("redistributes a DTensor from column shards to row shards and back without changing a bit", func() {
		m, err := mesh.ParseMesh("dp=2,tp=2")
		Expect(err).NotTo(HaveOccurred())
		global := harness.RandomTensor(numerics.BF16, []int{8, 8}, 5, harness.DefaultDist(numerics.BF16))
		col, row := mustLayout("col:tp", 2), mustLayout("row:tp", 2)
		blocks := make([]*tensor.Tensor, 4)
		ts := dist.NewInproc(4)
		done := make(chan error, 4)
		for r := range 4 {
			go func() {
				g, err := dtensor.NewGroups(m, dist.NewComm(ts[r], dist.Options{Timeout: 10 * time.Second}))
				if err == nil {
					var x, y *dtensor.DTensor
					if x, err = dtensor.FromGlobal(m, "W", col, global, r); err == nil {
						if y, err = x.Redistribute(context.Background(), g, row); err == nil {
							if y, err = y.Redistribute(context.Background(), g, col); err == nil {
								blocks[r] = y.Local
							}
						}
					}
				}
				done <- err
			}()
		}
		for range 4 {
			Expect(<-done).NotTo(HaveOccurred())
		}
		back, err := dtensor.Assemble(m, "W", col, blocks)
		Expect(err).NotTo(HaveOccurred())
		Expect(back.Data).To(Equal(global.Data))
	})
})

func mustLayout(s string, rank int) mesh.Layout {
	l, err := mesh.ParseLayout(s, rank)
	Expect(err).NotTo(HaveOccurred())
	return l
}

// seedMatmul is x[rows, n] @ W[n, n] in bf16 with an f32 accumulator (the seeds' policy).
func seedMatmul(n, rows int) *graph.Graph {
	b := graph.NewBuilder("seed_matmul")
	x := b.Input("x", numerics.BF16, rows, n)
	w := b.Input("W", numerics.BF16, n, n)
	b.Output(b.Op("matmul", graph.Attrs{"accum": graph.DTypeAttr(numerics.F32)}, x, w))
	g, err := b.Build()
	Expect(err).NotTo(HaveOccurred())
	return g
}
