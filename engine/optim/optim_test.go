package optim

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/backend/backendtest"
	"github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

var (
	f32 = numerics.F32
	f64 = numerics.F64
)

// configs are the optimizers the generic tests run.
var configs = []Optimizer{
	SGD{LR: 0.1},
	SGD{LR: 0.1, WeightDecay: 0.05},
	SGD{LR: 0.05, Momentum: 0.9},
	SGD{LR: 0.05, Momentum: 0.9, Nesterov: true, WeightDecay: 1e-2},
	SGD{LR: 0.05, Momentum: 0.9, Dampening: 0.1, WeightDecay: 1e-4},
	DefaultAdamW(),
	AdamW{LR: 1e-2, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6},
}

func name(o Optimizer) string { return fmt.Sprintf("%s%+v", o.Kind(), o) }

// problem is a seeded set of params and a sequence of grads.
type problem struct {
	params map[string]*tensor.Tensor
	grads  []map[string]*tensor.Tensor
}

func newProblem(seed uint64, dt numerics.DType, steps int) problem {
	rng := rand.New(rand.NewPCG(seed, 7))
	shapes := map[string][]int{"fc.w": {7, 5}, "fc.b": {5}, "scale": {}}
	pr := problem{params: map[string]*tensor.Tensor{}}
	for _, n := range slices.Sorted(maps.Keys(shapes)) {
		pr.params[n] = randn(rng, dt, shapes[n], 1, false)
	}
	for range steps {
		g := map[string]*tensor.Tensor{}
		for _, n := range slices.Sorted(maps.Keys(shapes)) {
			g[n] = randn(rng, dt, shapes[n], 0.5, false)
		}
		pr.grads = append(pr.grads, g)
	}
	return pr
}

func runSteps(t *testing.T, b backend.Backend, o Optimizer, params map[string]*tensor.Tensor, grads []map[string]*tensor.Tensor, st *State) {
	t.Helper()
	for k, g := range grads {
		if err := o.Step(b, params, g, st); err != nil {
			t.Fatalf("%s step %d: %v", name(o), k+1, err)
		}
	}
}

// The first AdamW step computed by hand in f32 (each fma through math/big, every other op
// rounded to f32) gives the same bits as the graph, and moves each param by about lr*sign(g)
// after the decay, as the first Adam step does.
func TestAdamWFirstStepByHand(t *testing.T) {
	pv := []float64{0.5, -1.25, 3, -0.001, 1e-3, 2}
	gv := []float64{0.3, -0.7, 1e-4, 2.5, -3, 1}
	p := tensor.FromFloat64(f32, []int{6}, pv)
	g := tensor.FromFloat64(f32, []int{6}, gv)
	o := DefaultAdamW()
	st := NewState()
	if err := o.Step(backendtest.CPU(t), map[string]*tensor.Tensor{"w": p}, map[string]*tensor.Tensor{"w": g}, st); err != nil {
		t.Fatal(err)
	}
	// Variables, not constants: Go folds constant expressions exactly, Python rounds each op.
	lr, b1, b2, wd, one := 1e-3, 0.9, 0.999, 1e-2, 1.0
	bc1, bc2 := one-b1, one-b2 // Python: 0.09999999999999998, 0.0010000000000000009
	decay := float32(one - float64(lr*wd))
	nss := float32(-(lr / bc1))
	bc2s := float32(math.Sqrt(bc2))
	for i := range pv {
		pi, gi := float32(pv[i]), float32(gv[i])
		p1 := float32(pi * decay)
		m := fma32(gi, float32(one-b1), float32(0*float32(b1)))
		u := float32(gi * float32(one-b2))
		v := fma32(u, gi, float32(0*float32(b2)))
		den := float32(float32(float32(math.Sqrt(float64(v)))/bc2s) + float32(1e-8))
		want := float32(p1 + float32(float32(nss*m)/den))
		if got := float32(p.Float64(i)); math.Float32bits(got) != math.Float32bits(want) {
			t.Errorf("param[%d] = %v, by hand %v", i, got, want)
		}
		if got := float32(st.get("w", BufExpAvg).Float64(i)); got != m {
			t.Errorf("exp_avg[%d] = %v, by hand %v", i, got, m)
		}
		if got := float32(st.get("w", BufExpAvgSq).Float64(i)); got != v {
			t.Errorf("exp_avg_sq[%d] = %v, by hand %v", i, got, v)
		}
		approx := float64(p1) - 1e-3*math.Copysign(1, gv[i])
		if d := math.Abs(p.Float64(i) - approx); d > 1e-6 {
			t.Errorf("param[%d] = %v, want about p*(1-lr*wd) - lr*sign(g) = %v (off by %g)", i, p.Float64(i), approx, d)
		}
	}
	if st.Step != 1 || st.Kind() != KindAdamW {
		t.Errorf("state after one step: step %d kind %q", st.Step, st.Kind())
	}
}

// The f64 update is the same ops in float64, each rounded once (no fma): bit for bit.
func TestAdamWFirstStepByHandF64(t *testing.T) {
	pv := []float64{0.5, -1.25, 3, -0.001}
	gv := []float64{0.3, -0.7, 1e-4, 2.5}
	p := tensor.FromFloat64(f64, []int{4}, pv)
	o := AdamW{LR: 1e-2, Beta1: 0.8, Beta2: 0.95, Eps: 1e-6, WeightDecay: 0.1}
	if err := o.Step(backendtest.CPU(t), map[string]*tensor.Tensor{"w": p}, map[string]*tensor.Tensor{"w": tensor.FromFloat64(f64, []int{4}, gv)}, NewState()); err != nil {
		t.Fatal(err)
	}
	// Variables, not constants: Go folds constant expressions exactly, Python rounds each op.
	lr, b1, b2, eps, wd, one := 1e-2, 0.8, 0.95, 1e-6, 0.1, 1.0
	for i := range pv {
		p1 := pv[i] * (one - float64(lr*wd))
		m := float64(gv[i]*(one-b1)) + float64(0*b1)
		v := float64(float64(gv[i]*(one-b2))*gv[i]) + float64(0*b2)
		den := math.Sqrt(v)/math.Sqrt(one-b2) + eps
		want := p1 + float64(-(lr/(one-b1))*m)/den
		if got := p.Float64(i); got != want {
			t.Errorf("param[%d] = %v, by hand %v", i, got, want)
		}
	}
}

// The first SGD step with momentum, Nesterov and weight decay by hand in f32.
func TestSGDFirstStepByHand(t *testing.T) {
	pv := []float64{0.5, -1.25, 3, -0.001, 7}
	gv := []float64{0.3, -0.7, 1e-4, 2.5, -1e-3}
	p := tensor.FromFloat64(f32, []int{5}, pv)
	o := SGD{LR: 0.1, Momentum: 0.9, Nesterov: true, WeightDecay: 0.1}
	st := NewState()
	if err := o.Step(backendtest.CPU(t), map[string]*tensor.Tensor{"w": p}, map[string]*tensor.Tensor{"w": tensor.FromFloat64(f32, []int{5}, gv)}, st); err != nil {
		t.Fatal(err)
	}
	for i := range pv {
		pi, gi := float32(pv[i]), float32(gv[i])
		d := fma32(pi, float32(0.1), gi)
		buf := d
		d2 := fma32(buf, float32(0.9), d)
		want := fma32(d2, float32(-0.1), pi)
		if got := float32(p.Float64(i)); math.Float32bits(got) != math.Float32bits(want) {
			t.Errorf("param[%d] = %v, by hand %v", i, got, want)
		}
		if got := float32(st.get("w", BufMomentum).Float64(i)); got != buf {
			t.Errorf("momentum_buffer[%d] = %v, by hand %v", i, got, buf)
		}
	}
	// Second step: buf = 0.9*buf + d (dampening 0: one add).
	g2 := tensor.FromFloat64(f32, []int{5}, gv)
	prev, pbuf := p.Clone(), st.get("w", BufMomentum).Clone()
	if err := o.Step(backendtest.CPU(t), map[string]*tensor.Tensor{"w": p}, map[string]*tensor.Tensor{"w": g2}, st); err != nil {
		t.Fatal(err)
	}
	for i := range pv {
		pi, gi := float32(prev.Float64(i)), float32(gv[i])
		d := fma32(pi, float32(0.1), gi)
		buf := float32(float32(float32(pbuf.Float64(i))*float32(0.9)) + d)
		want := fma32(fma32(buf, float32(0.9), d), float32(-0.1), pi)
		if got := float32(p.Float64(i)); math.Float32bits(got) != math.Float32bits(want) {
			t.Errorf("step 2: param[%d] = %v, by hand %v", i, got, want)
		}
	}
}

// Export after some steps, restore into a fresh State, and both continue with the same bits.
func TestStateRoundTripContinuesBitIdentically(t *testing.T) {
	b := backendtest.CPU(t)
	for _, dt := range []numerics.DType{f32, f64, numerics.BF16} {
		for _, o := range configs {
			t.Run(dt.String()+"/"+name(o), func(t *testing.T) {
				pr := newProblem(11, dt, 6)
				st := NewState()
				runSteps(t, b, o, pr.params, pr.grads[:3], st)
				ts := st.Tensors()
				for k := range ts {
					if !strings.HasSuffix(k, "/"+BufMomentum) && !strings.HasSuffix(k, "/"+BufExpAvg) && !strings.HasSuffix(k, "/"+BufExpAvgSq) {
						t.Errorf("exported name %q", k)
					}
				}
				if o.Kind() == KindAdamW && len(ts) != 6 || o.Kind() == KindSGD && len(ts) != 3*btoi(o.(SGD).Momentum != 0) {
					t.Errorf("exported %d tensors: %v", len(ts), slices.Sorted(maps.Keys(ts)))
				}
				st2, err := RestoreState(ts, st.Step)
				if err != nil {
					t.Fatal(err)
				}
				p2 := cloneAll(pr.params)
				runSteps(t, b, o, pr.params, pr.grads[3:], st)
				runSteps(t, b, o, p2, pr.grads[3:], st2)
				if k := sameBits(pr.params, p2); k != "" {
					t.Errorf("param %s differs after restore", k)
				}
				if k := sameBits(st.Tensors(), st2.Tensors()); k != "" || st.Step != st2.Step || st.Step != 6 {
					t.Errorf("state differs after restore at %q (steps %d, %d)", k, st.Step, st2.Step)
				}
			})
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Same inputs give the same bits: twice in a row, and with 1 or 3 CPU workers.
func TestSameInputsSameBits(t *testing.T) {
	for _, o := range configs {
		var ref map[string]*tensor.Tensor
		var refState map[string]*tensor.Tensor
		for _, b := range []backend.Backend{backendtest.CPU(t), backendtest.CPU(t), &cpu.Backend{Workers: 1}, &cpu.Backend{Workers: 3}} {
			pr := newProblem(5, f32, 4)
			st := NewState()
			runSteps(t, b, o, pr.params, pr.grads, st)
			if ref == nil {
				ref, refState = pr.params, st.Tensors()
				continue
			}
			if k := sameBits(ref, pr.params); k != "" {
				t.Errorf("%s: param %s differs between runs", name(o), k)
			}
			if k := sameBits(refState, st.Tensors()); k != "" {
				t.Errorf("%s: state %s differs between runs", name(o), k)
			}
		}
	}
}

// Every step changes every element of every param (the grads are random and non-zero), and the
// state holds non-zero values: no all-zero pass.
func TestStepChangesEveryParam(t *testing.T) {
	b := backendtest.CPU(t)
	for _, dt := range []numerics.DType{f32, f64} {
		for _, o := range configs {
			pr := newProblem(3, dt, 2)
			st := NewState()
			for k, g := range pr.grads {
				before := cloneAll(pr.params)
				if err := o.Step(b, pr.params, g, st); err != nil {
					t.Fatal(err)
				}
				for n, p := range pr.params {
					for i := range p.Len() {
						if p.Bits(i) == before[n].Bits(i) || math.IsNaN(p.Float64(i)) {
							t.Errorf("%s %s step %d: %s[%d] = %v, was %v", dt, name(o), k+1, n, i, p.Float64(i), before[n].Float64(i))
						}
					}
				}
				for n, s := range st.Tensors() {
					for i := range s.Len() {
						if s.Float64(i) == 0 || math.IsNaN(s.Float64(i)) {
							t.Errorf("%s %s step %d: state %s[%d] = %v", dt, name(o), k+1, n, i, s.Float64(i))
						}
					}
				}
			}
		}
	}
}

// A learning-rate schedule changes a scalar input, not the program: no recompilation.
func TestScheduleReusesTheProgram(t *testing.T) {
	b := backendtest.CPU(t)
	pr := newProblem(9, f32, 4)
	o := DefaultAdamW()
	st := NewState()
	if err := o.Step(b, pr.params, pr.grads[0], st); err != nil {
		t.Fatal(err)
	}
	n := len(programs.m)
	for k, g := range pr.grads[1:] {
		o.LR = 1e-3 / float64(k+2)
		if err := o.Step(b, pr.params, g, st); err != nil {
			t.Fatal(err)
		}
	}
	if len(programs.m) != n {
		t.Errorf("%d programs after a schedule, %d before", len(programs.m), n)
	}
}

// 16-bit params: the update is the f32 update of the widened param and grad, rounded back; the
// state is f32.
func TestBF16ParamsUseTheF32UpdateAndF32State(t *testing.T) {
	b := backendtest.CPU(t)
	for _, dt := range []numerics.DType{numerics.BF16, numerics.F16} {
		for _, o := range configs {
			lo := newProblem(21, dt, 3)
			wide := problem{params: widen(lo.params)}
			for _, g := range lo.grads {
				wide.grads = append(wide.grads, widen(g))
			}
			stLo, stWide := NewState(), NewState()
			for k := range lo.grads {
				runSteps(t, b, o, lo.params, lo.grads[k:k+1], stLo)
				runSteps(t, b, o, wide.params, wide.grads[k:k+1], stWide)
				if k := sameBits(stLo.Tensors(), stWide.Tensors()); k != "" {
					t.Fatalf("%s %s: state %s differs from the f32 update's", dt, name(o), k)
				}
				for n, p := range wide.params {
					want := tensor.New(dt, p.Shape)
					for i := range p.Len() {
						want.SetFloat64(i, p.Float64(i))
					}
					if !bytes.Equal(want.Data, lo.params[n].Data) {
						t.Fatalf("%s %s step %d: %s is not the f32 update rounded", dt, name(o), k+1, n)
					}
					wide.params[n] = widen(map[string]*tensor.Tensor{n: lo.params[n]})[n] // continue from the rounded param
				}
			}
			for _, s := range stLo.Tensors() {
				if s.DType != f32 {
					t.Errorf("%s state is %s", dt, s.TypeString())
				}
			}
		}
	}
}

func widen(m map[string]*tensor.Tensor) map[string]*tensor.Tensor {
	out := map[string]*tensor.Tensor{}
	for n, t := range m {
		w := tensor.New(f32, t.Shape)
		for i := range t.Len() {
			w.SetFloat64(i, t.Float64(i))
		}
		out[n] = w
	}
	return out
}

// Bad inputs are coded errors that name the param, and change nothing.
func TestBadInputsAreCodedErrorsAndChangeNothing(t *testing.T) {
	b := backendtest.CPU(t)
	okParams := func() map[string]*tensor.Tensor {
		return map[string]*tensor.Tensor{"a.w": tensor.FromFloat64(f32, []int{2, 3}, []float64{1, 2, 3, 4, 5, 6}),
			"z.b": tensor.FromFloat64(f32, []int{3}, []float64{1, 2, 3})}
	}
	okGrads := func() map[string]*tensor.Tensor {
		return map[string]*tensor.Tensor{"a.w": tensor.FromFloat64(f32, []int{2, 3}, []float64{1, 1, 1, 1, 1, 1}),
			"z.b": tensor.FromFloat64(f32, []int{3}, []float64{1, 1, 1})}
	}
	adamState := func() *State {
		st := NewState()
		if err := DefaultAdamW().Step(b, okParams(), okGrads(), st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	for _, c := range []struct {
		name  string
		opt   Optimizer
		edit  func(p, g map[string]*tensor.Tensor) *State
		code  errs.Code
		names string
	}{
		{"missing grad", DefaultAdamW(), func(p, g map[string]*tensor.Tensor) *State { delete(g, "z.b"); return NewState() }, errs.Input, `"z.b"`},
		{"nil grad", SGD{LR: 1}, func(p, g map[string]*tensor.Tensor) *State { g["z.b"] = nil; return NewState() }, errs.Input, `"z.b"`},
		{"grad shape", DefaultAdamW(), func(p, g map[string]*tensor.Tensor) *State {
			g["z.b"] = tensor.New(f32, []int{1, 3})
			return NewState()
		}, errs.Shape, `"z.b"`},
		{"grad dtype", SGD{LR: 1}, func(p, g map[string]*tensor.Tensor) *State {
			g["a.w"] = tensor.New(f64, []int{2, 3})
			return NewState()
		}, errs.DType, `"a.w"`},
		{"grad bytes", SGD{LR: 1}, func(p, g map[string]*tensor.Tensor) *State {
			g["z.b"].Data = g["z.b"].Data[:5]
			return NewState()
		}, errs.Input, `"z.b"`},
		{"grad without param", DefaultAdamW(), func(p, g map[string]*tensor.Tensor) *State {
			g["q"] = tensor.New(f32, []int{3})
			return NewState()
		}, errs.Input, `"q"`},
		{"int param", SGD{LR: 1}, func(p, g map[string]*tensor.Tensor) *State {
			p["z.b"], g["z.b"] = tensor.New(numerics.I32, []int{3}), tensor.New(numerics.I32, []int{3})
			return NewState()
		}, errs.DType, `"z.b"`},
		{"bad lr", SGD{LR: -1}, func(p, g map[string]*tensor.Tensor) *State { return NewState() }, errs.Input, "learning rate"},
		{"bad beta", AdamW{LR: 1, Beta1: 1}, func(p, g map[string]*tensor.Tensor) *State { return NewState() }, errs.Input, "beta1"},
		{"nesterov without momentum", SGD{LR: 1, Nesterov: true}, func(p, g map[string]*tensor.Tensor) *State { return NewState() }, errs.Input, "nesterov"},
		{"sgd on adamw state", SGD{LR: 1}, func(p, g map[string]*tensor.Tensor) *State { return adamState() }, errs.Input, "adamw state"},
		{"adamw state missing a param", DefaultAdamW(), func(p, g map[string]*tensor.Tensor) *State {
			st := adamState()
			delete(st.bufs, "z.b")
			return st
		}, errs.Input, `"z.b"`},
		{"state for no param", DefaultAdamW(), func(p, g map[string]*tensor.Tensor) *State {
			delete(p, "z.b")
			delete(g, "z.b")
			return adamState()
		}, errs.Input, `"z.b"`},
		{"state shape", DefaultAdamW(), func(p, g map[string]*tensor.Tensor) *State {
			st := adamState()
			st.bufs["z.b"][BufExpAvg] = tensor.New(f32, []int{4})
			return st
		}, errs.Shape, `"z.b"`},
		{"state dtype", DefaultAdamW(), func(p, g map[string]*tensor.Tensor) *State {
			st := adamState()
			st.bufs["a.w"][BufExpAvgSq] = tensor.New(f64, []int{2, 3})
			return st
		}, errs.DType, `"a.w"`},
		{"nil state", SGD{LR: 1}, func(p, g map[string]*tensor.Tensor) *State { return nil }, errs.Input, "NewState"},
	} {
		p, g := okParams(), okGrads()
		st := c.edit(p, g)
		before, stBefore := cloneAll(p), (*State)(nil)
		if st != nil {
			stBefore = &State{Step: st.Step, bufs: map[string]map[string]*tensor.Tensor{}}
			for n, bs := range st.bufs {
				for k, t := range bs {
					stBefore.put(n, k, t.Clone())
				}
			}
		}
		err := c.opt.Step(b, p, g, st)
		if errs.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.names) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want %s naming %s", c.name, err, c.code, c.names)
		}
		if k := sameBits(before, p); k != "" {
			t.Errorf("%s: param %s changed by a failed step", c.name, k)
		}
		if st != nil && (st.Step != stBefore.Step || sameBits(st.Tensors(), stBefore.Tensors()) != "") {
			t.Errorf("%s: state changed by a failed step", c.name)
		}
	}
	if err := (SGD{LR: 1}).Step(nil, okParams(), okGrads(), NewState()); errs.CodeOf(err) != errs.Input {
		t.Errorf("nil backend: %v", err)
	}
}

func TestRestoreStateRejectsBadTensors(t *testing.T) {
	x := tensor.New(f32, []int{3})
	for _, c := range []struct {
		name string
		ts   map[string]*tensor.Tensor
		step int
		want string
	}{
		{"no buffer part", map[string]*tensor.Tensor{"w": x}, 1, "<param>/<buffer>"},
		{"unknown buffer", map[string]*tensor.Tensor{"w/velocity": x}, 1, "velocity"},
		{"two kinds", map[string]*tensor.Tensor{"w/exp_avg": x, "w/exp_avg_sq": x, "b/momentum_buffer": x}, 1, "state"},
		{"half adamw", map[string]*tensor.Tensor{"w/exp_avg": x}, 1, `"w"`},
		{"int state", map[string]*tensor.Tensor{"w/momentum_buffer": tensor.New(numerics.I32, []int{3})}, 1, "f32 or f64"},
		{"mismatched moments", map[string]*tensor.Tensor{"w/exp_avg": x, "w/exp_avg_sq": tensor.New(f32, []int{4})}, 1, `"w"`},
		{"negative step", nil, -1, "step"},
	} {
		if _, err := RestoreState(c.ts, c.step); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error mentioning %s", c.name, err, c.want)
		}
	}
	st, err := RestoreState(map[string]*tensor.Tensor{"layer/0/w/momentum_buffer": x}, 4)
	if err != nil || st.Kind() != KindSGD || st.Step != 4 || st.get("layer/0/w", BufMomentum) == nil {
		t.Errorf("param names with slashes: %v %+v", err, st)
	}
}

// kernelCounts are the kernels each update compiles to (1000-element params); the ideal is one
// kernel per output. See the package doc for why chains of two-operand ops cost more.
var kernelCounts = []struct {
	name  string
	graph func(dt numerics.DType) (*compiler.Program, error)
	f32   int
	f64   int
}{
	{"sgd", sgdGraph(SGD{LR: 0.1}, false), 2, 1},
	{"sgd wd", sgdGraph(SGD{LR: 0.1, WeightDecay: 0.1}, false), 3, 1},
	{"sgd momentum", sgdGraph(SGD{LR: 0.1, Momentum: 0.9}, false), 3, 2},
	{"sgd momentum first step", sgdGraph(SGD{LR: 0.1, Momentum: 0.9}, true), 2, 1},
	{"sgd momentum nesterov wd", sgdGraph(SGD{LR: 0.1, Momentum: 0.9, Nesterov: true, WeightDecay: 0.1}, false), 6, 3},
	{"sgd momentum dampening", sgdGraph(SGD{LR: 0.1, Momentum: 0.9, Dampening: 0.1}, false), 4, 3},
	{"adamw", adamGraph(DefaultAdamW()), 8, 7},
	{"adamw wd=0", adamGraph(AdamW{LR: 1e-3, Beta1: 0.9, Beta2: 0.999}), 7, 6},
}

func sgdGraph(o SGD, first bool) func(numerics.DType) (*compiler.Program, error) {
	return func(dt numerics.DType) (*compiler.Program, error) {
		g, err := o.Graph(dt, []int{1000}, first)
		if err != nil {
			return nil, err
		}
		return compiler.Compile(g, compiler.Options{})
	}
}

func adamGraph(o AdamW) func(numerics.DType) (*compiler.Program, error) {
	return func(dt numerics.DType) (*compiler.Program, error) {
		g, err := o.Graph(dt, []int{1000})
		if err != nil {
			return nil, err
		}
		return compiler.Compile(g, compiler.Options{})
	}
}

func TestKernelCounts(t *testing.T) {
	for _, c := range kernelCounts {
		for _, dt := range []numerics.DType{f32, f64} {
			p, err := c.graph(dt)
			if err != nil {
				t.Fatal(err)
			}
			want := c.f32
			if dt == f64 {
				want = c.f64
			}
			t.Logf("%-26s %s: %d kernels for %d outputs", c.name, dt, len(p.Kernels), len(p.Graph.Outputs))
			if len(p.Kernels) != want {
				t.Errorf("%s %s: %d kernels, want %d", c.name, dt, len(p.Kernels), want)
			}
		}
	}
}
