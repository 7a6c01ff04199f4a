package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// runDiv compiles div(a, b){rounding_mode} and returns the CPU backend's and the golden
// model's results.
func runDiv(t *testing.T, mode string, a, b *tensor.Tensor) (cpuOut, refOut *tensor.Tensor) {
	t.Helper()
	gb := graph.NewBuilder("div")
	var attrs graph.Attrs
	if mode != "" {
		attrs = graph.Attrs{"rounding_mode": graph.String(mode)}
	}
	gb.Output(gb.Op("div", attrs, gb.Input("a", a.DType, a.Shape...), gb.Input("b", b.DType, b.Shape...)))
	g, err := gb.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	be, _ := backend.Get("cpu")
	in := map[string]*tensor.Tensor{"a": a, "b": b}
	got, err := be.Run(p, in)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Run(g, in)
	if err != nil {
		t.Fatal(err)
	}
	return got[0], want[0]
}

func sameValue(x, y float64) bool {
	return (math.IsNaN(x) && math.IsNaN(y)) || (x == y && math.Signbit(x) == math.Signbit(y))
}

// The expected values were measured with torch 1.13 (torch.div(a, b, rounding_mode=...)),
// signs of zeros included; integer x/0 is the engine's 0 (torch raises ZeroDivisionError).
func TestDivRoundingModesAgainstTorchValues(t *testing.T) {
	a := []float64{7, -7, 7, -7, 0, negz, 1, -1, 0, 5, -5, 1, 0.5, -0.5, 1, -1e-30, 3, -3, -3, 3, inf, nan, inf, inf}
	b := []float64{2, 2, -2, -2, 3, 3, 0, 0, 0, negz, negz, 0.1, 1, 1, -3, 5, inf, inf, -inf, -inf, 2, 2, 0, inf}
	want := map[string][]float64{
		"trunc": {3, -3, -3, 3, 0, negz, inf, -inf, nan, -inf, inf, 10, 0, negz, negz, negz, 0, negz, 0, negz, inf, nan, inf, nan},
		"floor": {3, -4, -4, 3, 0, negz, inf, -inf, nan, -inf, inf, 9, 0, -1, -1, -1, 0, -1, 0, -1, nan, nan, inf, nan},
	}
	for _, dt := range []numerics.DType{numerics.F64, numerics.F32, numerics.BF16, numerics.F16} {
		for mode, w := range want {
			av := append([]float64(nil), a...)
			wv := append([]float64(nil), w...)
			if dt == numerics.F16 {
				av[15] = -1e-4 // -1e-30 is -0 in f16
				if mode == "floor" {
					wv[11] = 10 // f16's 0.1 is 0.0999755859375: 1/that is 10.0024 (torch: 10)
				}
			}
			got, gold := runDiv(t, mode, tt(dt, []int{len(av)}, av...), tt(dt, []int{len(b)}, b...))
			for i := range wv {
				if !sameValue(got.Float64(i), wv[i]) || !sameValue(gold.Float64(i), wv[i]) {
					t.Errorf("%s %s: %g / %g: cpu %g, ref %g, torch %g", dt, mode, av[i], b[i], got.Float64(i), gold.Float64(i), wv[i])
				}
			}
		}
	}
	ia := []float64{7, -7, 7, -7, 0, 5, 9, -9, -128, 127}
	ib := []float64{2, 2, -2, -2, 3, 1, 0, 0, -1, -1}
	iwant := map[string][]float64{
		"trunc": {3, -3, -3, 3, 0, 5, 0, 0, -128, -127}, // -128 / -1 = 128 wraps in int8
		"floor": {3, -4, -4, 3, 0, 5, 0, 0, -128, -127},
	}
	for _, dt := range []numerics.DType{numerics.I8, numerics.I32} {
		for mode, w := range iwant {
			got, gold := runDiv(t, mode, tt(dt, []int{len(ia)}, ia...), tt(dt, []int{len(ib)}, ib...))
			for i := range w {
				wi := w[i]
				if dt == numerics.I32 && i == 8 {
					wi = 128 // no wrap in int32
				}
				if got.Float64(i) != wi || gold.Float64(i) != wi {
					t.Errorf("%s %s: %g / %g: cpu %g, ref %g, want %g", dt, mode, ia[i], ib[i], got.Float64(i), gold.Float64(i), wi)
				}
			}
		}
	}
}

// The CPU backend's fmod-free floor division gives the golden model's (torch's algorithm)
// bits on random operands of every scale, with broadcasting.
func TestDivRoundingModesMatchGoldenModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 1))
	for _, dt := range []numerics.DType{numerics.F64, numerics.F32, numerics.BF16, numerics.F16, numerics.I8, numerics.I32} {
		for _, mode := range []string{"trunc", "floor"} {
			a, b := tensor.New(dt, []int{64, 33}), tensor.New(dt, []int{33})
			for i := range a.Len() {
				a.SetFloat64(i, randDivOperand(rng, dt))
			}
			for i := range b.Len() {
				b.SetFloat64(i, randDivOperand(rng, dt))
			}
			got, gold := runDiv(t, mode, a, b)
			bad := 0
			for i := range got.Len() {
				if hugeQuotient(got.Float64(i), dt) && math.Abs(got.Float64(i)-gold.Float64(i)) <= 2*ulpOf(gold.Float64(i), dt) {
					continue // no fractions there: the fmod form and the FMA form may round differently
				}
				if !sameValue(got.Float64(i), gold.Float64(i)) {
					if bad++; bad < 4 {
						t.Errorf("%s %s: element %d: cpu %g, ref %g", dt, mode, i, got.Float64(i), gold.Float64(i))
					}
				}
			}
			if bad > 0 {
				t.Errorf("%s %s: %d of %d differ", dt, mode, bad, got.Len())
			}
		}
	}
}

// hugeQuotient: |q| is at or beyond 2^p for the dtype's compute precision p, where every value
// is an integer and floor division is the quotient's rounding.
func hugeQuotient(q float64, dt numerics.DType) bool {
	if dt == numerics.F64 {
		return math.Abs(q) >= 1<<53
	}
	return math.Abs(q) >= 1<<24
}

func ulpOf(x float64, dt numerics.DType) float64 {
	if dt == numerics.F64 {
		return math.Abs(math.Nextafter(x, math.Inf(1)) - x)
	}
	f := float32(x)
	return math.Abs(float64(math.Nextafter32(f, float32(math.Inf(1))) - f))
}

func randDivOperand(rng *rand.Rand, dt numerics.DType) float64 {
	if dt.IsInt() {
		return float64(rng.IntN(255) - 127)
	}
	return rng.NormFloat64() * math.Pow(10, float64(rng.IntN(7)-3))
}

func ExampleDivRoundingModes() {
	fmt.Println(floorDiv(-7, 2, true), truncDiv(-7, 2, numerics.F64), floorDiv(1, 0.1, true))
	// Output: -4 -3 9
}
