package training_test

import (
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/profiling"
)

// Issue 24: `train --mesh dp=2,tp=2 --transport tcp --profile` gives one trace with a process
// per rank and collective spans, and the per-rank summary with overlap and the straggler
// ranking; the bits are those of the unprofiled run.
var _ = Describe("A profiled tcp run", func() {
	It("of `--mesh dp=2,tp=2` writes a valid trace with a process per rank and collective spans, and keeps the bits", func() {
		dir := GinkgoT().TempDir()
		args := []string{"--model", "mlp", "--steps", "3", "--seed", "1", "--mesh", "dp=2,tp=2", "--transport", "tcp"}
		code, plain := cli(args...)
		Expect(code).To(Equal(0))
		code, prof := cli(append(args, "--profile", dir)...)
		Expect(code).To(Equal(0))
		Expect(prof.Digest).To(Equal(plain.Digest))
		Expect(lossBits(prof)).To(Equal(lossBits(plain)))
		st, err := profiling.ValidateFile(filepath.Join(dir, "train.trace.json"))
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Processes).To(HaveLen(4))
		for pid, name := range st.Processes {
			Expect(name).To(Equal("rank " + string(rune('0'+pid-1))))
		}
		Expect(st.Categories["comm"]).To(BeNumerically(">", 0))
		Expect(st.Categories["compute"]).To(BeNumerically(">", 0))
		ranks, _, err := profiling.LoadRanks(dir)
		Expect(err).NotTo(HaveOccurred())
		sum := profiling.Summarize(ranks)
		Expect(sum).To(HaveLen(4))
		var b strings.Builder
		profiling.WriteRankSummary(&b, sum)
		Expect(b.String()).To(ContainSubstring("overlap"))
	})
})
