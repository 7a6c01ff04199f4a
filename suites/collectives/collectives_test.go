package collectives_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/tessera-qa/tessera-qa/suites/internal/qabin"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/collectives"
	"github.com/tessera-qa/tessera-qa/engine/backend/cuda"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

const seed = 7

// every is the full matrix at small counts: every op, reduction and dtype; zero, one, primes
// (no world above 1 divides them) and one power of two.
var every = collectives.Matrix{Ops: collectives.Ops, RedOps: collectives.RedOps, DTypes: collectives.DTypes,
	Counts: []int{0, 1, 7, 1021, 4096}}

// wire is what the process specs run (and compare with in-process rows): every op and
// reduction on four dtypes that cover 8-, 16- and 32-bit elements and an fp8 sum.
var wire = collectives.Matrix{Ops: collectives.Ops, RedOps: collectives.RedOps,
	DTypes: []numerics.DType{numerics.F32, numerics.BF16, numerics.I8, numerics.F8E4M3}, Counts: []int{0, 1, 7, 1021}, Sizes: []int64{16 << 10}}

// wireArgs are the verb's flags for wire.
var wireArgs = []string{"--ops", "all", "--redops", "all", "--dtypes", "f32,bf16,int8,fp8e4m3", "--counts", "0,1,7,1021",
	"-b", "16K", "-e", "16K", "-f", "2", "--iters", "1", "--warmup", "0", "--seed", strconv.Itoa(seed)}

func inproc(n int, m collectives.Matrix, mode dist.Mode, delay time.Duration) []collectives.Row {
	GinkgoHelper()
	rows, err := collectives.RunInproc(context.Background(), n, collectives.Config{Cases: m.Cases(n), Mode: mode, Seed: seed, Delay: delay})
	Expect(err).NotTo(HaveOccurred())
	return rows
}

// allPass fails the spec on any row that is not OK, naming the first few.
func allPass(rows []collectives.Row) {
	GinkgoHelper()
	var bad []string
	for _, r := range rows {
		if !r.OK {
			bad = append(bad, r.Key()+": "+r.Note)
		}
	}
	Expect(bad).To(BeEmpty(), "%d of %d rows failed", len(bad), len(rows))
}

var _ = Describe("collectives in process", Label("cpu"), func() {
	for _, n := range []int{1, 2, 3, 4, 8} {
		It(fmt.Sprintf("matches the float64 global answer for every op, reduction, dtype and count on %d ranks, in every mode", n), func() {
			for _, mode := range []dist.Mode{dist.Deterministic, dist.Fast, dist.Exact} {
				m := every
				m.Root = n - 1 // the last rank broadcasts
				rows := inproc(n, m, mode, 0)
				allPass(rows)
				Expect(len(rows)).To(BeNumerically(">", 250))
			}
		})
	}

	It("handles a 64 MiB all_reduce on the CPU", func() {
		m := collectives.Matrix{Ops: []collectives.Op{collectives.AllReduce}, RedOps: []dist.RedOp{dist.Sum}, DTypes: []numerics.DType{numerics.F32}, Sizes: []int64{64 << 20}}
		rows := inproc(4, m, dist.Deterministic, 0)
		allPass(rows)
		Expect(rows).To(HaveLen(1))
		Expect(rows[0].Bytes).To(Equal(int64(64 << 20)))
	})

	It("returns the same bits over 3 runs", func() {
		for _, mode := range []dist.Mode{dist.Deterministic, dist.Exact} {
			first := inproc(4, wire, mode, 0)
			for range 2 {
				Expect(collectives.CompareDigests(first, inproc(4, wire, mode, 0))).To(BeEmpty())
			}
		}
	})

	It("returns the same bits when injected per-rank delays reorder arrivals", func() {
		for _, mode := range []dist.Mode{dist.Deterministic, dist.Exact} {
			calm := inproc(4, wire, mode, 0)
			delayed := inproc(4, wire, mode, 200*time.Microsecond)
			allPass(delayed)
			Expect(collectives.CompareDigests(calm, delayed)).To(BeEmpty())
		}
	})

	It("gives identical exact-mode bits on every all_reduce row for world sizes 1, 2, 3, 4 and 8", func() {
		m := collectives.Matrix{Ops: []collectives.Op{collectives.AllReduce}, RedOps: collectives.RedOps, DTypes: collectives.DTypes,
			Counts: []int{1, 7, 1021, 5000}}
		var rows []collectives.Row
		for _, n := range []int{1, 2, 3, 4, 8} {
			r := inproc(n, m, dist.Exact, 0)
			allPass(r)
			rows = append(rows, r...)
		}
		cases, bad := collectives.SplitAgreement(rows)
		Expect(bad).To(BeEmpty())
		Expect(cases).To(Equal(len(collectives.RedOps) * len(collectives.DTypes) * 4))
	})

	It("fails a mismatched count, dtype or op across ranks with E_DESYNC and leaves no rank waiting", func() {
		m := collectives.Matrix{Ops: collectives.Ops, RedOps: []dist.RedOp{dist.Sum}, DTypes: []numerics.DType{numerics.F32}, Counts: []int{64}}
		for _, what := range []string{"count", "dtype", "op"} {
			start := time.Now()
			// RunInproc returns only when every rank has returned.
			_, err := collectives.RunInproc(context.Background(), 4, collectives.Config{Cases: m.Cases(4), Seed: seed,
				Timeout: 20 * time.Second, Mismatch: &collectives.Mismatch{Rank: 2, What: what}})
			Expect(err).To(MatchError(ContainSubstring("E_DESYNC")), what)
			Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second), "%s: a rank waited for its timeout", what)
		}
	})

	// An empty buffer is still a collective call: a rank that sends elements while the others
	// call with none must be told, not skipped (nor left waiting) because 0 bytes move.
	It("fails a rank that calls with elements while the others call with an empty buffer (count 0) with E_DESYNC", func() {
		m := collectives.Matrix{Ops: collectives.Ops, RedOps: []dist.RedOp{dist.Sum}, DTypes: []numerics.DType{numerics.F32}, Counts: []int{0}}
		for _, op := range collectives.Ops {
			m.Ops = []collectives.Op{op}
			start := time.Now()
			_, err := collectives.RunInproc(context.Background(), 4, collectives.Config{Cases: m.Cases(4), Seed: seed,
				Timeout: 20 * time.Second, Mismatch: &collectives.Mismatch{Rank: 1, What: "count"}})
			Expect(err).To(MatchError(ContainSubstring("E_DESYNC")), string(op))
			Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second), "%s: a rank waited for its timeout", op)
		}
	})
})

// result is one run of the binary.
type result = qabin.Result

// runBin runs the suite's tessera-qa with args and extra environment, bounded by two minutes
// (SIGTERM, which the launcher forwards to its ranks, then SIGKILL).
func runBin(env []string, args ...string) result {
	GinkgoHelper()
	if bin == "" {
		Skip("no tessera-qa binary: " + binErr)
	}
	r, err := qabin.Run(bin, append(cleanEnv(), env...), 2*time.Minute, 10*time.Second, args...)
	Expect(err).NotTo(HaveOccurred())
	return r
}

// cleanEnv is this process's environment without rank variables, so a spec never joins a
// job by accident.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID", "TESSERA_RDZV", "TESSERA_RDZV_JOB", collectives.ResultEnv:
			continue
		}
		out = append(out, kv)
	}
	return out
}

// leftovers lists the processes still running the suite's binary.
func leftovers() []string { return qabin.Leftovers(bin) }

func noneLeft() {
	GinkgoHelper()
	Eventually(leftovers).WithTimeout(5 * time.Second).WithPolling(100 * time.Millisecond).Should(BeEmpty())
}

func report(data string) collectives.Report {
	GinkgoHelper()
	var rep collectives.Report
	Expect(json.Unmarshal([]byte(data), &rep)).To(Succeed(), "not a collectives report:\n%s", data)
	return rep
}

// sameBits checks tcp rows against in-process rows of the same matrix and world: as many rows,
// none wrong, the same bits on every deterministic and exact row.
func sameBits(in, tcp []collectives.Row) {
	GinkgoHelper()
	allPass(tcp)
	Expect(tcp).To(HaveLen(len(in)))
	for _, r := range tcp {
		Expect(r.Transport).To(Equal("tcp"))
	}
	Expect(collectives.CompareDigests(in, tcp)).To(BeEmpty())
}

// freePort is a loopback port nothing listens on right now.
func freePort() int {
	GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

var _ = Describe("collectives over tcp processes", Label("cpu"), func() {
	AfterEach(func() { noneLeft() })

	for _, n := range []int{2, 4} {
		It(fmt.Sprintf("matches the global answer with %d processes and returns the same bits over tcp as in-process", n), func() {
			for _, mode := range []dist.Mode{dist.Deterministic, dist.Exact} {
				args := append([]string{"collectives", "--transport", "tcp", "--np", strconv.Itoa(n), "--mode", mode.String(), "--json", "-"}, wireArgs...)
				r := runBin(nil, args...)
				Expect(r.Code).To(Equal(0), r.Stderr)
				sameBits(inproc(n, wire, mode, 0), report(r.Stdout).Rows)
			}
		})
	}

	It("returns the same bits over tcp with injected per-rank delays as in-process without", func() {
		r := runBin(nil, append([]string{"collectives", "--transport", "tcp", "--np", "4", "--delay", "500us", "--json", "-"}, wireArgs...)...)
		Expect(r.Code).To(Equal(0), r.Stderr)
		sameBits(inproc(4, wire, dist.Deterministic, 0), report(r.Stdout).Rows)
	})

	It("joins as one rank under tessera-qa launch --nproc-per-node 3", func() {
		out := filepath.Join(GinkgoT().TempDir(), "rows.json")
		args := append([]string{"launch", "--nproc-per-node", "3", "--", bin, "collectives", "--transport", "tcp", "--json", out}, wireArgs...)
		r := runBin(nil, args...)
		Expect(r.Code).To(Equal(0), r.Stderr)
		Expect(r.Stdout).To(ContainSubstring("[rank 0] PASS"))
		data, err := os.ReadFile(out)
		Expect(err).NotTo(HaveOccurred())
		sameBits(inproc(3, wire, dist.Deterministic, 0), report(string(data)).Rows)
	})

	It("joins as one rank with torchrun-style variables set by hand", func() {
		port := strconv.Itoa(freePort())
		dir := GinkgoT().TempDir()
		var cmds []*exec.Cmd
		var outs []*bytes.Buffer
		for rank := range 2 {
			args := append([]string{"collectives", "--transport", "tcp", "--json", filepath.Join(dir, "rows.json")}, wireArgs...)
			cmd := exec.Command(bin, args...)
			cmd.Env = append(cleanEnv(), "RANK="+strconv.Itoa(rank), "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+port)
			var b bytes.Buffer
			cmd.Stdout, cmd.Stderr = &b, &b
			Expect(cmd.Start()).To(Succeed())
			cmds, outs = append(cmds, cmd), append(outs, &b)
		}
		// End them by id whatever happens.
		DeferCleanup(func() {
			for _, c := range cmds {
				c.Process.Kill()
			}
		})
		for rank, c := range cmds {
			done := make(chan error, 1)
			go func() { done <- c.Wait() }()
			Eventually(done).WithTimeout(2*time.Minute).Should(Receive(BeNil()), "rank %d:\n%s", rank, outs[rank])
		}
		Expect(outs[1].String()).To(BeEmpty(), "ranks other than 0 print nothing on success")
		data, err := os.ReadFile(filepath.Join(dir, "rows.json"))
		Expect(err).NotTo(HaveOccurred())
		sameBits(inproc(2, wire, dist.Deterministic, 0), report(string(data)).Rows)
	})

	It("fails with E_DESYNC and exit 2, leaving no rank behind, when one process calls a different count", func() {
		r := runBin(nil, "collectives", "--transport", "tcp", "--np", "3", "--mismatch", "1:count", "--timeout", "30s", "--iters", "0", "-e", "1K")
		Expect(r.Code).To(Equal(2), r.Stderr)
		Expect(r.Stderr).To(MatchRegexp(`\[rank \d\] tessera-qa: E_DESYNC: `))
		for _, line := range strings.Split(strings.TrimSpace(r.Stderr), "\n") {
			Expect(line).To(MatchRegexp(`^(\[rank \d\] tessera-qa: E_[A-Z_]+: |\[launch\] )`), "every line is a rank's one coded error line or the launcher's")
		}
	})

	DescribeTable("rejects bad input with one coded line and exit 2",
		func(env []string, args ...string) {
			r := runBin(env, append([]string{"collectives", "--transport", "tcp", "-e", "1K"}, args...)...)
			Expect(r.Code).To(Equal(2), r.Stderr)
			Expect(strings.Split(strings.TrimSpace(r.Stderr), "\n")).To(HaveLen(1))
			Expect(r.Stderr).To(HavePrefix("tessera-qa: E_INPUT: "))
		},
		Entry("a malformed --np", nil, "--np", "four"),
		Entry("--np 0", nil, "--np", "0"),
		Entry("RANK outside WORLD_SIZE", []string{"RANK=2", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29999"}),
		Entry("--np other than the launcher's WORLD_SIZE", []string{"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29999"}, "--np", "3"),
	)

	It("answers one E_NO_DEVICE line and exit 3 for a device transport on a machine without a GPU, starting no rank", func() {
		if _, err := cuda.Devices(); err == nil {
			Skip("this machine has a CUDA device")
		}
		for _, args := range [][]string{
			{"--transport", "cuda", "--np", "2"},
			{"--transport", "cuda", "--np", "4", "--compare-host", "--json", "-"},
			{"--transport", "nccl", "--np", "1"},
		} {
			r := runBin(nil, append([]string{"collectives", "-e", "1K"}, args...)...)
			Expect(r.Code).To(Equal(3), r.Stderr)
			Expect(strings.Split(strings.TrimSpace(r.Stderr), "\n")).To(HaveLen(1))
			Expect(r.Stderr).To(HavePrefix("tessera-qa: E_NO_DEVICE: "))
			Expect(r.Stdout).To(BeEmpty())
			Expect(leftovers()).To(BeEmpty())
		}
	})

	It("refuses exact mode on a device transport with one E_INPUT line and exit 2", func() {
		r := runBin(nil, "collectives", "--transport", "cuda", "--np", "2", "--mode", "exact", "-e", "1K")
		Expect(r.Code).To(Equal(2), r.Stderr)
		Expect(r.Stderr).To(HavePrefix("tessera-qa: E_INPUT: "))
	})
})
