package optim

import (
	"maps"
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// The buffers an optimizer keeps per param, named as torch names them in optimizer.state.
const (
	BufMomentum = "momentum_buffer" // SGD with momentum
	BufExpAvg   = "exp_avg"         // AdamW: first moment
	BufExpAvgSq = "exp_avg_sq"      // AdamW: second moment
)

// kindOfBuf maps a buffer name to the optimizer that owns it.
var kindOfBuf = map[string]string{BufMomentum: KindSGD, BufExpAvg: KindAdamW, BufExpAvgSq: KindAdamW}

// State is an optimizer's state: the number of steps taken and, per param, the buffers
// (momentum_buffer; exp_avg and exp_avg_sq). Buffers of an f64 param are f64, all others f32.
// A State belongs to one optimizer kind, fixed by its first buffer. It is not safe for
// concurrent Steps.
type State struct {
	// Step counts completed steps; AdamW's bias corrections use Step+1 for the next one.
	Step int
	kind string                               // KindSGD, KindAdamW, or "" while no buffer exists
	bufs map[string]map[string]*tensor.Tensor // param -> buffer name -> tensor
}

// NewState returns an empty state at step 0.
func NewState() *State { return &State{bufs: map[string]map[string]*tensor.Tensor{}} }

// Kind is the optimizer kind the state belongs to, "" while it holds no buffer.
func (s *State) Kind() string { return s.kind }

// Tensors returns a copy of every buffer, named "<param>/<buffer>" (e.g. "fc1.w/exp_avg").
// With Step it is the whole state: RestoreState(s.Tensors(), s.Step) continues bit for bit.
func (s *State) Tensors() map[string]*tensor.Tensor {
	out := map[string]*tensor.Tensor{}
	for p, bs := range s.bufs {
		for b, t := range bs {
			out[p+"/"+b] = t.Clone()
		}
	}
	return out
}

// RestoreState rebuilds a state from Tensors' names and a step count. Names must end in a
// known buffer ("/momentum_buffer", "/exp_avg", "/exp_avg_sq") of one optimizer kind, and an
// AdamW param needs both of its buffers; tensors are copied.
func RestoreState(ts map[string]*tensor.Tensor, step int) (*State, error) {
	if step < 0 {
		return nil, errs.New(errs.Input, "optim: restore at step %d: step must be >= 0", step)
	}
	s := NewState()
	s.Step = step
	for _, name := range slices.Sorted(maps.Keys(ts)) {
		t := ts[name]
		i := strings.LastIndexByte(name, '/')
		if i <= 0 {
			return nil, errs.New(errs.Input, "optim: state tensor %q is not named <param>/<buffer>", name)
		}
		p, b := name[:i], name[i+1:]
		kind, ok := kindOfBuf[b]
		if !ok {
			return nil, errs.New(errs.Input, "optim: state tensor %q: unknown buffer %q (want %s, %s or %s)", name, b, BufMomentum, BufExpAvg, BufExpAvgSq)
		}
		if s.kind != "" && s.kind != kind {
			return nil, errs.New(errs.Input, "optim: state tensor %q is %s state, but the others are %s state", name, kind, s.kind)
		}
		if err := checkTensor("state tensor "+name, t); err != nil {
			return nil, err
		}
		if !stateDType(t.DType) {
			return nil, errs.New(errs.DType, "optim: state tensor %q is %s: state is f32 or f64", name, t.TypeString())
		}
		s.kind = kind
		s.put(p, b, t.Clone())
	}
	for p, bs := range s.bufs {
		if s.kind == KindAdamW && (bs[BufExpAvg] == nil || bs[BufExpAvgSq] == nil) {
			return nil, errs.New(errs.Input, "optim: param %q has only one of %s and %s", p, BufExpAvg, BufExpAvgSq)
		}
		if s.kind == KindAdamW && !sameType(bs[BufExpAvg], bs[BufExpAvgSq]) {
			return nil, errs.New(errs.Shape, "optim: param %q: %s is %s but %s is %s", p, BufExpAvg, bs[BufExpAvg].TypeString(), BufExpAvgSq, bs[BufExpAvgSq].TypeString())
		}
	}
	return s, nil
}

func (s *State) put(param, buf string, t *tensor.Tensor) {
	if s.bufs == nil {
		s.bufs = map[string]map[string]*tensor.Tensor{}
	}
	if s.bufs[param] == nil {
		s.bufs[param] = map[string]*tensor.Tensor{}
	}
	s.bufs[param][buf] = t
}

func (s *State) get(param, buf string) *tensor.Tensor { return s.bufs[param][buf] }
