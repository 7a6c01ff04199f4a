package profile_test

import (
	"fmt"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/profiling"
)

// graphs are small programs covering each kernel kind: matmul with a fused epilogue, row
// softmax, reduction, attention, a ragged elementwise chain.
var graphs = map[string]string{
	"mlp": `graph mlp {
  input %x: f32[4,8]
  input %w1: f32[8,16]
  input %b1: f32[16]
  input %w2: f32[16,4]
  %h: f32[4,16] = matmul(%x, %w1)
  %hb = add(%h, %b1)
  %a = gelu(%hb) {approx="tanh"}
  %logits: f32[4,4] = matmul(%a, %w2)
  %p = softmax(%logits) {axis=-1}
  %p16: bf16[4,4] = cast(%p) {to=bf16}
  output %p, %p16
}`,
	"attention": `graph attn {
  input %q: f32[70,16]
  input %k: f32[70,16]
  input %v: f32[70,16]
  %s = matmul(%q, %k) {transpose_b=true}
  %pr = softmax(%s) {axis=-1}
  %o = matmul(%pr, %v)
  output %o
}`,
	"reduce": `graph red {
  input %x: f32[33,300]
  %e = exp(%x)
  %m = mul(%e, %x)
  %r = reduce_sum(%m) {axes=[1]}
  output %r
}`,
}

var _ = Describe("A profiled run", func() {
	for _, name := range []string{"mlp", "attention", "reduce"} {
		It(fmt.Sprintf("of %s keeps every output's bits, records each kernel once per run with its grid, and writes a valid trace", name), func() {
			g, err := graph.Parse(graphs[name], name+".tg")
			Expect(err).NotTo(HaveOccurred())
			in, err := harness.RandomInputs(g, 11, nil)
			Expect(err).NotTo(HaveOccurred())
			b, err := backend.Get("cpu")
			Expect(err).NotTo(HaveOccurred())
			p, err := compiler.Compile(g, compiler.Options{})
			Expect(err).NotTo(HaveOccurred())
			plain, err := b.Run(p, in)
			Expect(err).NotTo(HaveOccurred())
			rec := &profiling.Recorder{}
			prof, err := backend.RunProfiled(b, p, in, rec)
			Expect(err).NotTo(HaveOccurred())
			for i := range plain {
				Expect(prof[i].Digest()).To(Equal(plain[i].Digest()), "output %d with profiling on", i)
			}
			launches, _ := rec.Take()
			Expect(launches).To(HaveLen(len(p.Kernels)))
			for i, l := range launches {
				grid := int64(1)
				for _, d := range p.Kernels[i].Grid {
					grid *= int64(d)
				}
				Expect(l.Kernel).To(Equal(p.Kernels[i].Name))
				Expect(l.Points).To(Equal(grid), "kernel %s ran %d grid points, its grid %v has %d", l.Kernel, l.Points, p.Kernels[i].Grid, grid)
				Expect(l.Dur).To(BeNumerically(">", 0))
			}

			rep, err := profiling.Profile(g, in, b, profiling.Options{Reps: 2})
			Expect(err).NotTo(HaveOccurred())
			for _, k := range rep.Kernels {
				Expect(k.Points).To(Equal(k.GridPoints), "kernel %s %s", k.Name, k.Label)
				Expect(k.Bytes).To(BeNumerically(">", 0), "kernel %s moves no bytes", k.Name)
			}
			path := filepath.Join(traceDir, name+".trace.json")
			Expect(rep.Trace().WriteFile(path)).To(Succeed())
			st, err := profiling.ValidateFile(path)
			Expect(err).NotTo(HaveOccurred())
			Expect(st.Flows).To(Equal(2 * len(rep.Kernels)))
		})
	}
})

var _ = Describe("A profiled CUDA run", Label("gpu"), func() {
	It("of mlp reports CUDA-event times, registers, spills and theoretical occupancy, and keeps the bits", func() {
		b, err := backend.Get("cuda")
		if err != nil {
			Skip("cuda backend not compiled in: " + err.Error())
		}
		if err := b.Available(); err != nil {
			Skip("no GPU: " + err.Error())
		}
		g, err := graph.Parse(graphs["mlp"], "mlp.tg")
		Expect(err).NotTo(HaveOccurred())
		in, err := harness.RandomInputs(g, 11, nil)
		Expect(err).NotTo(HaveOccurred())
		p, err := compiler.Compile(g, compiler.Options{})
		Expect(err).NotTo(HaveOccurred())
		plain, err := b.Run(p, in)
		Expect(err).NotTo(HaveOccurred())
		prof, err := backend.RunProfiled(b, p, in, &profiling.Recorder{})
		Expect(err).NotTo(HaveOccurred())
		for i := range plain {
			Expect(prof[i].Digest()).To(Equal(plain[i].Digest()))
		}
		rep, err := profiling.Profile(g, in, b, profiling.Options{Reps: 3})
		Expect(err).NotTo(HaveOccurred())
		for _, k := range rep.Kernels {
			Expect(k.Attrs).To(HaveKey("regs"), "kernel %s", k.Name)
			Expect(k.Attrs).To(HaveKey("local_bytes"))
			Expect(k.Attrs["occupancy_pct"]).To(BeNumerically(">", 0))
			Expect(k.MedianUS).To(BeNumerically(">", 0))
		}
		path := filepath.Join(traceDir, "mlp-cuda.trace.json")
		Expect(rep.Trace().WriteFile(path)).To(Succeed())
		_, err = profiling.ValidateFile(path)
		Expect(err).NotTo(HaveOccurred())
	})
})
