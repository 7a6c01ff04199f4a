package differential

import (
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// RunGraph computes one graph on the oracle and returns its outputs and the oracle's mode. A
// case the oracle cannot compute is E_UNSUPPORTED, any other per-case failure E_INPUT. It is
// for single explicit checks (suites/differential's semantics specs); Runner batches.
func (o *Oracle) RunGraph(t Target, g *graph.Graph, inputs map[string]*tensor.Tensor) ([]*tensor.Tensor, string, error) {
	p, err := Prepare(g.Name, g, inputs)
	if err != nil {
		return nil, "", err
	}
	res, err := o.Eval(t, []WireCase{p.Case})
	if err != nil {
		return nil, "", err
	}
	r := res[0]
	switch {
	case r.Unsupported:
		return nil, "", errs.New(errs.Unsupported, "unsupported by oracle %s: %s", o.hello.Framework, r.Error)
	case r.Error != "":
		return nil, "", errs.New(errs.Input, "oracle %s failed on graph %s: %s", o.hello.Framework, g.Name, r.Error)
	}
	outs, err := p.Decode(r)
	return outs, joinMode(r.Mode, p.Transport.Note()), err
}

// RunEngine compiles g and runs it on b, turning a panic into an E_INTERNAL error.
func RunEngine(b backend.Backend, g *graph.Graph, inputs map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	var outs []*tensor.Tensor
	err := protect("compile and run", func() error {
		prog, err := compiler.Compile(g, compiler.Options{})
		if err != nil {
			return err
		}
		outs, err = b.Run(prog, inputs)
		return err
	})
	return outs, err
}
