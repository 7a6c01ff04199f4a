package ptx

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

type attnShape struct {
	bh, sq, sk, d, dv int
	causal            bool
}

func (a attnShape) String() string {
	return fmt.Sprintf("%dx[%d,%d]x[%d,%d]x%d causal=%v", a.bh, a.sq, a.d, a.sk, a.d, a.dv, a.causal)
}

func attnGraph(t *testing.T, dt numerics.DType, a attnShape, attrs graph.Attrs) *graph.Graph {
	t.Helper()
	b := graph.NewBuilder("attn")
	if attrs == nil {
		attrs = graph.Attrs{}
	}
	attrs["causal"] = graph.Bool(a.causal)
	b.Output(b.Op("attention", attrs, b.Input("q", dt, a.bh, a.sq, a.d), b.Input("k", dt, a.bh, a.sk, a.d),
		b.Input("v", dt, a.bh, a.sk, a.dv)))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func attnKernelOf(t *testing.T, g *graph.Graph) *tile.Kernel {
	t.Helper()
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Kernels) != 1 {
		t.Fatalf("%d kernels", len(p.Kernels))
	}
	return p.Kernels[0]
}

func TestAttentionMatch(t *testing.T) {
	for _, c := range []struct {
		dt    numerics.DType
		a     attnShape
		attrs graph.Attrs
		want  bool
	}{
		{numerics.BF16, attnShape{4, 4096, 4096, 128, 128, false}, nil, true},
		{numerics.F16, attnShape{2, 200, 300, 64, 64, true}, nil, true},
		{numerics.BF16, attnShape{1, 67, 45, 16, 16, true}, nil, true},
		{numerics.BF16, attnShape{2, 37, 131, 8, 5, false}, nil, false},    // dv not a multiple of 8
		{numerics.BF16, attnShape{1, 64, 64, 256, 256, false}, nil, false}, // head dim over 128
		{numerics.F32, attnShape{1, 64, 64, 64, 64, false}, nil, false},    // no f32 tensor-core path
		{numerics.BF16, attnShape{1, 64, 64, 64, 64, false}, graph.Attrs{"scale": graph.Float(-0.5)}, false},
	} {
		k := attnKernelOf(t, attnGraph(t, c.dt, c.a, c.attrs))
		s, ok := matchAttention(k)
		if ok != c.want {
			t.Errorf("%s %s: matched %v, want %v", c.dt, c.a, ok, c.want)
			continue
		}
		if ok && (s.bh != c.a.bh || s.sq != c.a.sq || s.sk != c.a.sk || s.d != c.a.d || s.dv != c.a.dv || s.causal != c.a.causal) {
			t.Errorf("%s %s: spec %+v", c.dt, c.a, s)
		}
	}
	// A matmul is not attention, and attention is not a matmul.
	if _, ok := matchAttention(matmulKernel(t, numerics.BF16, mmShape{0, 64, 64, 64, false, false}, nil)); ok {
		t.Error("a matmul matched as attention")
	}
	if _, ok := matchGemm(attnKernelOf(t, attnGraph(t, numerics.BF16, attnShape{1, 64, 64, 64, 64, false}, nil))); ok {
		t.Error("attention matched as a matmul")
	}
}

func TestAttentionGeneratesWellFormedPTX(t *testing.T) {
	for _, a := range []attnShape{{64, 4096, 4096, 128, 128, false}, {64, 4096, 4096, 128, 128, true}, {3, 100, 70, 40, 64, false}} {
		k := attnKernelOf(t, attnGraph(t, numerics.BF16, a, nil))
		m, err := Generate(k, sm90a)
		if err != nil {
			t.Fatal(err)
		}
		if m.Path != "wgmma" || !strings.HasPrefix(m.Tile, "wgmma 128x128") || m.SharedBytes > maxShared || m.Threads != attnThreads+wsCopiers {
			t.Errorf("%s: path %q tile %q shared %d", a, m.Path, m.Tile, m.SharedBytes)
		}
		if err := checkPTX(m.PTX, len(k.Params)); err != nil {
			t.Errorf("%s: %v", a, err)
		}
		s, _ := matchAttention(k)
		if ws := attnKernel(s, attnCfg{stages: 2, ws: true}, sm90a, "tq_k0", len(k.Params)); ws.Threads != 384 {
			t.Errorf("%s ws: %d threads", a, ws.Threads)
		} else if err := checkPTX(ws.PTX, len(k.Params)); err != nil {
			t.Errorf("%s ws: %v", a, err)
		}
		// Not on sm_90 without the a suffix, nor on the SIMT-only target.
		for _, tg := range []Target{{SM: 90, PTXVersion: "8.0"}, {SM: 90, ArchSuffix: "a", PTXVersion: "8.0", SIMTOnly: true}} {
			if m, err := Generate(k, tg); err != nil || m.Tile != "" {
				t.Errorf("%s on %s: tile %q, err %v", a, tg.Arch(), m.Tile, err)
			}
		}
	}
}

// TestAttentionSimulated runs every CTA of the dedicated kernel in the simulator on ragged
// shapes (partial query and key tiles, padded head dims, causal with Sq != Sk, both ring
// depths) and compares with the float64 golden model within the golden tolerance of
// attention, plus: a NaN in one query row makes exactly that row NaN, and nothing outside O's
// rows and columns is written.
func TestAttentionSimulated(t *testing.T) {
	cases := []struct {
		dt numerics.DType
		a  attnShape
	}{
		{numerics.BF16, attnShape{1, 136, 200, 64, 64, false}}, // ragged in both lengths, every variant: kept small
		{numerics.BF16, attnShape{1, 150, 260, 128, 128, true}},
		{numerics.F16, attnShape{1, 300, 140, 40, 24, true}},
		{numerics.F16, attnShape{1, 67, 45, 16, 16, false}},
	}
	if testing.Short() {
		cases = cases[2:]
	}
	for i, c := range cases {
		k := attnKernelOf(t, attnGraph(t, c.dt, c.a, nil))
		s, ok := matchAttention(k)
		if !ok {
			t.Fatalf("%s not matched", c.a)
		}
		// Every variant on the first case; the default and the lockstep kernel on the rest.
		cfgs := []attnCfg{defaultAttnCfg(s), {stages: 2, late: true}}
		if i == 0 {
			cfgs = []attnCfg{{stages: 2}, {stages: 3}, {stages: 2, late: true}, {stages: 3, late: true}, {stages: 2, ws: true}, {stages: 3, ws: true}}
		}
		for _, cfg := range cfgs {
			if !cfg.valid(s) {
				continue
			}
			m := attnKernel(s, cfg, sm90a, "tq_k0", len(k.Params))
			if err := simulateAttention(t, m, k, s, c.a, int64(i)); err != nil {
				t.Errorf("%s %s %s: %v", c.dt, c.a, cfg, err)
			}
		}
	}
}

func simulateAttention(t *testing.T, m *Module, k *tile.Kernel, s attnSpec, a attnShape, seed int64) error {
	t.Helper()
	sim, err := newSim(m.PTX, s.dt, m.Threads, m.SharedBytes)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 17))
	const nanRow = 3 // query row 3 of batch 0 holds a NaN
	bufs := make([][]byte, len(k.Params))
	ins := map[string]*tensor.Tensor{}
	for i, p := range k.Params {
		bufs[i] = make([]byte, 2*p.Len)
		vals := make([]float64, p.Len)
		for j := range vals {
			bits := uint64(0xFFFF) // poison: NaN in both formats
			if !p.Output {
				bits = numerics.Encode(s.dt, rng.NormFloat64())
				if i == s.q && j == nanRow*s.d+1 {
					bits = 0x7FFF
				}
			}
			vals[j] = numerics.Decode(s.dt, bits)
			bufs[i][2*j], bufs[i][2*j+1] = byte(bits), byte(bits>>8)
		}
		base := uint64(i+1) << 32
		sim.global[base] = bufs[i]
		sim.params[m.Entry+"_p"+itoa(i)] = base
		if !p.Output {
			shape := map[int][]int{s.q: {a.bh, a.sq, a.d}, s.k: {a.bh, a.sk, a.d}, s.v: {a.bh, a.sk, a.dv}}[i]
			tn := tensor.New(numerics.F64, shape)
			for j, v := range vals {
				tn.SetFloat64(j, v)
			}
			ins[strings.TrimPrefix(p.Name, "%")] = tn
		}
	}
	for by := 0; by < m.Grid[1]; by++ {
		for bx := 0; bx < m.Grid[0]; bx++ {
			sim.ctaid = [2]uint64{uint64(bx), uint64(by)}
			if err := sim.run(); err != nil {
				return err
			}
		}
	}
	g := attnGraph(t, numerics.F64, a, nil)
	want, err := ref.Run(g, ins)
	if err != nil {
		return err
	}
	tol := map[numerics.DType]float64{numerics.BF16: 0x1p-7, numerics.F16: 0x1p-10}[s.dt]
	out := bufs[s.o]
	bad := 0
	for j := range len(out) / 2 {
		got := numerics.Decode(s.dt, uint64(out[2*j])|uint64(out[2*j+1])<<8)
		w := want[0].Float64s()[j]
		row := j / a.dv
		switch {
		case row%a.sq == nanRow && row < a.sq:
			if got == got {
				bad++
				t.Logf("row %d (the NaN row) col %d: %g", row, j%a.dv, got)
			}
		case got != got || math.Abs(got-w) > tol*(1+math.Abs(w)):
			if bad < 5 {
				t.Logf("out[%d] (row %d col %d): got %g want %g", j, row, j%a.dv, got, w)
			}
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d outputs wrong", bad, len(out)/2)
	}
	return nil
}
