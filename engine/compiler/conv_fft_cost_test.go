package compiler

import (
	"bufio"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// costRow is one point of testdata/conv_fft_cost.tsv (written by BenchmarkConvFFTCost).
type costRow struct {
	g            graph.ConvGeom
	direct, fast float64 // measured CPU time of the direct and the FFT form, in yardstick runs
}

// convGeomOf resolves the geometry of the benchmark's conv: padding K/2, stride 1, an
// h x w image (h 1 for a conv1d).
func convGeomOf(t testing.TB, dims, n, cin, cout, groups, h, w, k int) graph.ConvGeom {
	t.Helper()
	var nd *graph.Node
	build(t, func(b *graph.Builder) {
		attrs := graph.Attrs{"padding": graph.Ints(int64(k / 2)), "groups": graph.Int(int64(groups))}
		f32 := numerics.F32
		if dims == 1 {
			b.Output(b.Named("y", "conv1d", attrs, b.Input("x", f32, n, cin, w), b.Input("w", f32, cout, cin/groups, k)))
		} else {
			b.Output(b.Named("y", "conv2d", attrs, b.Input("x", f32, n, cin, h, w), b.Input("w", f32, cout, cin/groups, k, k)))
		}
		nd = b.Graph().Nodes[len(b.Graph().Nodes)-1]
	})
	g, err := graph.ConvDims(nd, types(nd.Inputs))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

const costTablePath = "testdata/conv_fft_cost.tsv"

func readCostTable(t *testing.T) []costRow {
	t.Helper()
	f, err := os.Open(costTablePath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []costRow
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		fs := strings.Fields(sc.Text())
		if len(fs) != 11 {
			t.Fatalf("conv_fft_cost.tsv:%d: %d fields, want 11", line, len(fs))
		}
		var v [11]float64
		for i, s := range fs {
			if v[i], err = strconv.ParseFloat(s, 64); err != nil {
				t.Fatalf("conv_fft_cost.tsv:%d: %v", line, err)
			}
		}
		g := convGeomOf(t, int(v[0]), int(v[1]), int(v[2]), int(v[3]), int(v[4]), int(v[5]), int(v[6]), int(v[7]))
		rows = append(rows, costRow{g, v[8] / v[10], v[9] / v[10]})
	}
	if len(rows) < 20 {
		t.Fatalf("conv_fft_cost.tsv: %d rows, the sweep has more", len(rows))
	}
	return rows
}

// leastSquares solves min sum_i ((x_i . c - y_i) / y_i)^2: relative error, because the
// decision compares two forms point by point, over times that span four decades.
func leastSquares(xs [][]float64, ys []float64) []float64 {
	k := len(xs[0])
	a := make([][]float64, k)
	for i := range a {
		a[i] = make([]float64, k+1)
	}
	for r, x := range xs {
		w := 1 / (ys[r] * ys[r])
		for i := range k {
			for j := range k {
				a[i][j] += w * x[i] * x[j]
			}
			a[i][k] += w * x[i] * ys[r]
		}
	}
	for c := range k { // Gauss-Jordan with partial pivoting on the normal equations
		p := c
		for r := c + 1; r < k; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		a[c], a[p] = a[p], a[c]
		for r := range k {
			if r != c {
				f := a[r][c] / a[c][c]
				for j := c; j <= k; j++ {
					a[r][j] -= f * a[c][j]
				}
			}
		}
	}
	out := make([]float64, k)
	for i := range out {
		out[i] = a[i][k] / a[i][i]
	}
	return out
}

// fitConvCost fits both forms' times to their counts and returns the model's constants in
// units of one micro-kernel multiply-add, in the order of convCostNames. The radix weights
// enter the counts non-linearly, so they are searched on a grid of quarters (the best
// least-squares residual of the FFT form wins); the rest are linear least squares.
func fitConvCost(rows []costRow) [9]float64 {
	var xd [][]float64
	var yd, yf []float64
	for _, r := range rows {
		vec, scalar, tiles, gather := ConvDirectTerms(r.g)
		xd, yd = append(xd, []float64{vec, scalar, tiles, gather, 1}), append(yd, r.direct)
		yf = append(yf, r.fast)
	}
	d := leastSquares(xd, yd)
	best, f, r3, r5 := math.Inf(1), []float64(nil), 0.0, 0.0
	for q3 := 4; q3 <= 40; q3++ {
		for q5 := 4; q5 <= 48; q5++ {
			w3, w5 := float64(q3)/4, float64(q5)/4
			xf := make([][]float64, len(rows))
			for i, r := range rows {
				fftW, fftH, mul := convFFTTerms(r.g, w3, w5)
				xf[i] = []float64{fftW, fftH, mul, 1}
			}
			c := leastSquares(xf, yf)
			var e float64
			for i, x := range xf {
				p := c[0]*x[0] + c[1]*x[1] + c[2]*x[2] + c[3]
				e += (p/yf[i] - 1) * (p/yf[i] - 1)
			}
			if e < best {
				best, f, r3, r5 = e, c, w3, w5
			}
		}
	}
	return [9]float64{d[1] / d[0], d[2] / d[0], d[3] / d[0], f[0] / d[0], f[1] / d[0], r3, r5, f[2] / d[0], (f[3] - d[4]) / d[0]}
}

var convCostNames = [9]string{"scalarMACCost", "tileCost", "gatherCost", "fftPerPoint", "fftStridedPerPoint", "fftRadix3", "fftRadix5", "complexMulCost", "kernelOverhead"}

// TestConvFFTCostFit holds the cost model to the measured table: its constants are the
// table's least-squares fit, and its decision is the measured faster form wherever the two
// differ by more than the 15% a shared machine's noise can move a ratio.
func TestConvFFTCostFit(t *testing.T) {
	rows := readCostTable(t)
	fit := fitConvCost(rows)
	have := []float64{scalarMACCost, tileCost, gatherCost, fftPerPoint, fftStridedPerPoint, fftRadix3, fftRadix5, complexMulCost, kernelOverhead}
	for i, v := range fit {
		if v < 0 {
			t.Errorf("fitted %s = %.3g < 0: the model's form does not fit the table", convCostNames[i], v)
		}
		if math.Abs(have[i]-v) > 0.01*math.Abs(v) {
			t.Errorf("%s = %.3g, the table's fit is %.3g: refit after changing the table", convCostNames[i], have[i], v)
		}
	}
	if r3, r5 := fit[5], fit[6]; r3 == 1 || r3 == 10 || r5 == 1 || r5 == 12 {
		t.Errorf("radix weights %.2f, %.2f lie on the edge of the fit's grid: widen it", r3, r5)
	}
	for _, r := range rows {
		ratio := r.direct / r.fast
		pays := ConvFFTPays(r.g)
		t.Logf("%-60v direct %9.3f  fft %9.3f  direct/fft %6.3f  model %s (direct %.3g fft %.3g)", r.g, r.direct, r.fast, ratio, map[bool]string{true: "fft", false: "direct"}[pays], ConvDirectCost(r.g), ConvFFTCost(r.g))
		if math.Abs(ratio-1) < 0.15 {
			continue
		}
		if pays != (ratio > 1) {
			t.Errorf("%v: measured direct/fft %.3f, the model takes %s (modelled direct %.3g, fft %.3g)", r.g, ratio, map[bool]string{true: "fft", false: "direct"}[pays], ConvDirectCost(r.g), ConvFFTCost(r.g))
		}
	}
}

// TestConvFFTSmallKernelStaysDirect: a 3x3 (and a 1-D K=3) conv is direct over every
// channel count, batch and image size the model could be asked about (up to the graph's
// element limit).
func TestConvFFTSmallKernelStaysDirect(t *testing.T) {
	for _, c := range []int{1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 512, 1024} {
		for _, n := range []int{1, 4, 32} {
			for _, s := range []int{4, 16, 64, 256, 1024} {
				for dims := 1; dims <= 2; dims++ {
					h, w := s, s
					if dims == 1 {
						h, w = 1, 4*s
					}
					if n*c*h*w > 1<<28 {
						continue
					}
					for _, co := range []int{1, c} {
						g := convGeomOf(t, dims, n, c, co, 1, h, w, 3)
						if ConvFFTPays(g) {
							t.Fatalf("%v: the model takes the FFT form for a K=3 kernel (direct %.3g, fft %.3g)", g, ConvDirectCost(g), ConvFFTCost(g))
						}
					}
				}
			}
		}
	}
}

// TestForceConvFFT: the option that lets the benchmark time the FFT form of a conv the
// model keeps direct rewrites every candidate, and still no conv the rewrite cannot take.
func TestForceConvFFT(t *testing.T) {
	hasOp := func(p *Program, op string) bool {
		for _, n := range p.Graph.Nodes {
			if n.Op == op {
				return true
			}
		}
		return false
	}
	conv := func(stride int64) *graph.Graph {
		return build(t, func(b *graph.Builder) {
			f32 := numerics.F32
			b.Output(b.Named("y", "conv2d", graph.Attrs{"padding": graph.Ints(1), "stride": graph.Ints(stride)}, b.Input("x", f32, 1, 4, 16, 16), b.Input("w", f32, 4, 4, 3, 3)))
		})
	}
	if p := mustCompile(t, conv(1), Options{}); !hasOp(p, "conv2d") || hasOp(p, "rfft") {
		t.Errorf("3x3 conv without ForceConvFFT: the model should keep it direct")
	}
	if p := mustCompile(t, conv(1), Options{ForceConvFFT: true}); hasOp(p, "conv2d") || !hasOp(p, "rfft") {
		t.Errorf("3x3 conv with ForceConvFFT: want the FFT form (rfft, no conv2d)")
	}
	if p := mustCompile(t, conv(2), Options{ForceConvFFT: true}); !hasOp(p, "conv2d") {
		t.Errorf("strided conv with ForceConvFFT: not a candidate, must stay direct")
	}
}
