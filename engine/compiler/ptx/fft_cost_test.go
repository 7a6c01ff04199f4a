package ptx

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// TestFFTRowCost prints, with TESSERA_FFT_COST=1, what one row of the bench's FFT shapes
// costs in the generated PTX, counted by running it in the emulator: global and shared
// accesses and their bytes, barriers, instructions, all per row (a CTA's kernel is the bench
// shape's; only the number of CTAs is smaller). An estimate of the GPU time, not a timing.
func TestFFTRowCost(t *testing.T) {
	if os.Getenv("TESSERA_FFT_COST") == "" {
		t.Skip("set TESSERA_FFT_COST=1 to count what an FFT row costs")
	}
	for _, c := range []struct {
		op          string
		shape, full []int
	}{
		{"fft", []int{8, 1024, 2}, []int{16384, 1024, 2}},
		{"fft", []int{2, 4096, 2}, []int{4096, 4096, 2}},
		{"rfft", []int{16, 1024}, []int{16384, 1024}},
		{"rfft", []int{2, 4096}, []int{4096, 4096}},
	} {
		b := graph.NewBuilder("fft")
		b.Output(b.Op(c.op, nil, b.Input("x", numerics.F32, c.shape...)))
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		p, err := compiler.Compile(g, compiler.Options{})
		if err != nil {
			t.Fatal(err)
		}
		x := tensor.New(numerics.F32, c.shape)
		r := rand.New(rand.NewPCG(1, 2))
		for j := range x.Len() {
			x.SetFloat64(j, r.Float64()-0.5)
		}
		emuCount = &emuCounts{ops: map[string]int64{}, bytes: map[string]int64{}}
		if os.Getenv("TESSERA_FFT_COST") == "ops" {
			emuCount.each = map[string]int64{}
		}
		_, mod := emulateFFT(t, p, map[string]*tensor.Tensor{"x": x}, nil)
		n := emuCount
		emuCount = nil
		rows := int64(c.shape[0])
		big := opModule(t, c.op, numerics.F32, nil, c.full...)
		line := fmt.Sprintf("%s f32 %v (CTA of %v: %d threads, %d B shared; bench shape: %d threads, %d B shared, grid %d) per row:",
			c.op, c.shape[1:], mod.Grid[0], mod.Threads, mod.SharedBytes, big.Threads, big.SharedBytes, big.Grid[0])
		for _, k := range []string{"ld.global", "st.global", "ld.shared", "st.shared"} {
			line += fmt.Sprintf(" %s %d (%d B)", k, n.ops[k]/rows, n.bytes[k]/rows)
		}
		line += fmt.Sprintf(" bar.sync %d a CTA, instructions %d", n.ops["bar.sync"]/int64(mod.Threads)/int64(mod.Grid[0]), n.instr/rows)
		t.Log(line)
		if n.each != nil {
			ops := slices.SortedFunc(maps.Keys(n.each), func(a, b string) int { return cmp.Compare(n.each[b], n.each[a]) })
			for _, op := range ops {
				t.Logf("  %-24s %8d a row", op, n.each[op]/rows)
			}
		}
	}
}
