package spectral

import (
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// numpyScript times numpy.fft.fft of a complex64 [B, N] batch: median of reps, in seconds.
const numpyScript = `
import sys, time, numpy as np
b, n, reps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(1)
x = (rng.random((b, n)) - 0.5 + 1j * (rng.random((b, n)) - 0.5)).astype(np.complex64)
np.fft.fft(x)
ts = []
for _ in range(reps):
    t = time.perf_counter(); np.fft.fft(x); ts.append(time.perf_counter() - t)
ts.sort(); print(ts[len(ts) // 2])
`

// BenchmarkFFTvsNumpy times the engine's batched f32 c2c FFT (compiled program, CPU backend)
// and numpy.fft.fft on the same shape in the same run, and reports their ratio
// (engine time / numpy time): go test ./spectral -run NONE -bench FFTvsNumpy -benchtime 1x.
func BenchmarkFFTvsNumpy(b *testing.B) {
	const reps = 15
	for _, sh := range [][2]int{{64, 1024}, {16, 4096}, {4, 65536}, {8, 4093}} {
		batch, n := sh[0], sh[1]
		b.Run(strconv.Itoa(batch)+"x"+strconv.Itoa(n), func(b *testing.B) {
			out, err := exec.Command("/usr/bin/python3", "-c", numpyScript, strconv.Itoa(batch), strconv.Itoa(n), strconv.Itoa(reps)).Output()
			if err != nil {
				b.Skipf("numpy via /usr/bin/python3: %v", err)
			}
			np, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
			if err != nil {
				b.Fatal(err)
			}
			gb := graph.NewBuilder("bench_fft")
			gb.Output(gb.Op("fft", nil, gb.Input("x", numerics.F32, batch, n, 2)))
			g, err := gb.Build()
			if err != nil {
				b.Fatal(err)
			}
			p, err := compiler.Compile(g, compiler.Options{})
			if err != nil {
				b.Fatal(err)
			}
			be, _ := backend.Get("cpu")
			x := tensor.New(numerics.F32, []int{batch, n, 2})
			for i, z := range Uniform(numerics.F32, batch*n, 1) {
				x.SetFloat64(2*i, real(z))
				x.SetFloat64(2*i+1, imag(z))
			}
			in := map[string]*tensor.Tensor{"x": x}
			if _, err := be.Run(p, in); err != nil {
				b.Fatal(err)
			}
			for range b.N {
				ts := make([]float64, reps)
				for i := range ts {
					t0 := time.Now()
					if _, err := be.Run(p, in); err != nil {
						b.Fatal(err)
					}
					ts[i] = time.Since(t0).Seconds()
				}
				sort.Float64s(ts)
				b.ReportMetric(ts[reps/2]*1e3, "engine-ms")
				b.ReportMetric(np*1e3, "numpy-ms")
				b.ReportMetric(ts[reps/2]/np, "engine/numpy")
			}
		})
	}
}
