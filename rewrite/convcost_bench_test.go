package rewrite

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// convCostPoint is one conv of the direct-vs-FFT sweep: "same" padding (K/2), stride 1,
// f32; the image is h x w (h is 1 for a conv1d), the kernel K x K (1 x K).
type convCostPoint struct {
	dims, n, cin, cout, groups, h, w, k int
}

func c1(n, cin, cout, l, k int) convCostPoint { return convCostPoint{1, n, cin, cout, 1, 1, l, k} }
func c2(n, cin, cout, s, k int) convCostPoint { return convCostPoint{2, n, cin, cout, 1, s, s, k} }

func (p convCostPoint) name() string {
	return fmt.Sprintf("conv%dd/N=%d/Cin=%d/Cout=%d/G=%d/%dx%d/K=%d", p.dims, p.n, p.cin, p.cout, p.groups, p.h, p.w, p.k)
}

func (p convCostPoint) graph() (*graph.Graph, error) {
	b := graph.NewBuilder("convcost")
	f32 := numerics.F32
	attrs := graph.Attrs{"padding": graph.Ints(int64(p.k / 2)), "groups": graph.Int(int64(p.groups))}
	if p.dims == 1 {
		b.Output(b.Named("y", "conv1d", attrs, b.Input("x", f32, p.n, p.cin, p.w), b.Input("w", f32, p.cout, p.cin/p.groups, p.k)))
	} else {
		b.Output(b.Named("y", "conv2d", attrs, b.Input("x", f32, p.n, p.cin, p.h, p.w), b.Input("w", f32, p.cout, p.cin/p.groups, p.k, p.k)))
	}
	return b.Build()
}

// convCostSweep spreads K, L, channels and batch over the ranges of issue 26: small kernels
// (where direct must win), the large ones (where FFT should) and the points between, where
// the crossover lies; two grouped ones, one of them the rewrite suite's 2-D match; and, last,
// small images over many channels, whose direct kernel runs many small tile products (the
// fit needs them to tell a product's fixed cost from its operand gather's).
var convCostSweep = []convCostPoint{
	c1(1, 1, 1, 1024, 3), c1(1, 1, 1, 1024, 31), c1(1, 1, 1, 1024, 255),
	c1(4, 2, 2, 1024, 15), c1(4, 2, 2, 1024, 63), c1(4, 2, 2, 1024, 127),
	c1(1, 8, 8, 256, 7), c1(1, 8, 8, 256, 63), c1(1, 8, 8, 4096, 31), c1(1, 8, 8, 4096, 127),
	c1(2, 16, 16, 1024, 3), c1(2, 16, 16, 1024, 31), c1(2, 16, 16, 1024, 127),
	c1(1, 32, 32, 512, 15), c1(1, 32, 32, 512, 63), c1(1, 32, 32, 2048, 255),
	c1(2, 4, 16, 4096, 255), c1(1, 1, 1, 4096, 63),
	c1(1, 1, 8, 1024, 255), c1(4, 1, 1, 2048, 255), c1(1, 1, 1, 4096, 255), c1(1, 2, 4, 2048, 127),
	c2(1, 1, 1, 32, 3), c2(1, 1, 1, 64, 7), c2(1, 1, 1, 64, 15), c2(1, 1, 1, 128, 31),
	c2(1, 4, 4, 64, 3), c2(1, 4, 4, 64, 9), c2(1, 4, 4, 128, 15), c2(1, 4, 4, 32, 31),
	c2(1, 16, 16, 32, 3), c2(1, 16, 16, 64, 7), c2(1, 16, 16, 64, 15),
	c2(1, 1, 1, 96, 31), c2(1, 1, 1, 128, 21), c2(2, 1, 2, 64, 31), c2(1, 2, 2, 128, 31),
	{1, 2, 8, 8, 4, 1, 2048, 255}, {2, 1, 2, 2, 2, 72, 60, 31},
	c1(4, 32, 1, 16, 3), c1(4, 32, 4, 64, 3), c2(4, 32, 1, 8, 3), c2(4, 32, 32, 8, 3), c2(2, 16, 1, 16, 5),
}

// convCostYardstick is timed beside every sweep point and the table's times are divided by
// it: on the shared development machine a run's CPU time per unit of work moves by up to 2x
// over tens of seconds (the other jobs share the cores' pipelines), and it moves the
// yardstick's with it, so the ratio is what the fit may compare across points.
var convCostYardstick = c1(1, 8, 8, 1024, 31)

// BenchmarkConvFFTCost compiles each sweep point both ways on the CPU backend (conv-fft
// skipped, and forced by Options.ForceConvFFT), checks that the two outputs agree within the
// rewrite suite's tolerance, then takes the CPU time of the runs (not the compiles), the two
// forms and the yardstick alternating rep by rep so that a change in the machine's state hits
// all three, and reports the medians and their ratio. With TESSERA_CONVCOST_TABLE=path it
// writes the table the cost model is fitted to (engine/compiler/testdata/conv_fft_cost.tsv):
//
//	TESSERA_CONVCOST_TABLE=$PWD/engine/compiler/testdata/conv_fft_cost.tsv \
//	  go test ./rewrite -run NONE -bench ConvFFTCost -benchtime 1x -cpu 1 -timeout 30m
func BenchmarkConvFFTCost(b *testing.B) {
	be, err := backend.Get("cpu")
	if err != nil {
		b.Fatal(err)
	}
	yard, yardIn, err := convCostProgram(convCostYardstick, compiler.Options{Skip: []string{ConvFFT}})
	if err != nil {
		b.Fatal(err)
	}
	rows := map[convCostPoint]string{}
	for _, p := range convCostSweep {
		b.Run(p.name(), func(b *testing.B) {
			direct, in, err := convCostProgram(p, compiler.Options{Skip: []string{ConvFFT}})
			if err != nil {
				b.Fatal(err)
			}
			fft, _, err := convCostProgram(p, compiler.Options{ForceConvFFT: true})
			if err != nil {
				b.Fatal(err)
			}
			if !slices.ContainsFunc(fft.Graph.Nodes, func(n *graph.Node) bool { return strings.HasPrefix(n.Op, "rfft") }) {
				b.Fatalf("%s: the forced program has no rfft: the rewrite did not apply", p.name())
			}
			want, err := be.Run(direct, in)
			if err != nil {
				b.Fatal(err)
			}
			got, err := be.Run(fft, in)
			if err != nil {
				b.Fatal(err)
			}
			if c := harness.Check(got[0], want[0], convFFTTol.NoGuard()); !c.Pass {
				b.Fatalf("%s: FFT form vs direct: %s", p.name(), c.Reason)
			}
			for range b.N {
				t := alternatingMedians(b, func() error { return runOnce(be, direct, in) }, func() error { return runOnce(be, fft, in) },
					func() error { return runOnce(be, yard, yardIn) })
				b.ReportMetric(t[0]*1e3, "direct-cpu-ms")
				b.ReportMetric(t[1]*1e3, "fft-cpu-ms")
				b.ReportMetric(t[0]/t[1], "direct/fft")
				b.ReportMetric(t[2]*1e3, "yardstick-cpu-ms")
				rows[p] = fmt.Sprintf("%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.4f\t%.4f\t%.4f", p.dims, p.n, p.cin, p.cout, p.groups, p.h, p.w, p.k, t[0]*1e3, t[1]*1e3, t[2]*1e3)
			}
		})
	}
	if path := os.Getenv("TESSERA_CONVCOST_TABLE"); path != "" && len(rows) == len(convCostSweep) {
		text := "# direct-vs-FFT conv on the CPU backend (BenchmarkConvFFTCost in rewrite/), f32, padding K/2, stride 1, median CPU ms (user+sys);\n" +
			"# yardstick: the direct " + convCostYardstick.name() + ", timed beside each point\n" +
			"# dims\tN\tC_in\tC_out\tgroups\tH\tW\tK\tdirect_ms\tfft_ms\tyardstick_ms\n"
		for _, p := range convCostSweep {
			text += rows[p] + "\n"
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// convCostProgram compiles point p with opts and draws its inputs (seed 1).
func convCostProgram(p convCostPoint, opts compiler.Options) (*compiler.Program, map[string]*tensor.Tensor, error) {
	g, err := p.graph()
	if err != nil {
		return nil, nil, err
	}
	in, err := harness.RandomInputs(g, 1, nil)
	if err != nil {
		return nil, nil, err
	}
	prog, err := compiler.Compile(g, opts)
	return prog, in, err
}

func cpuSeconds(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func runOnce(be backend.Backend, p *compiler.Program, in map[string]*tensor.Tensor) error {
	_, err := be.Run(p, in)
	return err
}

// alternatingMedians runs fs in turn, at least 5 and at most 25 times each and until they
// have run for 1 s in all, and returns their median CPU times (user + system, the whole
// process's) in seconds. CPU time, not wall time: on the shared development machine the
// other jobs take the cores in bursts, which stretch wall times by up to 2x from one rep to
// the next but leave the work a run does about the same.
func alternatingMedians(b *testing.B, fs ...func() error) []float64 {
	ts := make([][]float64, len(fs))
	var total float64
	for len(ts[0]) < 5 || (total < 1 && len(ts[0]) < 25) {
		for i, f := range fs {
			t0 := cpuSeconds(b)
			if err := f(); err != nil {
				b.Fatal(err)
			}
			d := cpuSeconds(b) - t0
			total += d
			ts[i] = append(ts[i], d)
		}
	}
	med := make([]float64, len(fs))
	for i, t := range ts {
		slices.Sort(t)
		med[i] = t[len(t)/2]
	}
	return med
}
