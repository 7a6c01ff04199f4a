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

// VJP computes one graph's outputs and its vector-Jacobian product on the oracle: grads[i] is
// the gradient of sum_j <cotangents[j], output j> with respect to input wrt[i], in that input's
// dtype (torch.autograd.grad with allow_unused, or jax.vjp). A wrt input no gradient reaches
// gets zeros, and mode names it. Without t.Native the oracle computes in f64 (inputs upcast,
// every node in f64, results rounded once: the mathematical gradient at the given inputs, to be
// compared under a dtype tolerance); with t.Native, in the inputs' dtypes with the framework's
// own kernels. mode says which. A bad request is E_INPUT, E_DTYPE or E_SHAPE naming the value
// (PrepareVJP); an op the oracle cannot differentiate E_UNSUPPORTED; any other per-case
// failure E_INPUT. To batch, send PrepareVJP's cases in one Eval and read them with DecodeVJP.
func (o *Oracle) VJP(t Target, g *graph.Graph, inputs map[string]*tensor.Tensor, cotangents []*tensor.Tensor, wrt []string) (outs, grads []*tensor.Tensor, mode string, err error) {
	p, err := PrepareVJP(g.Name, g, inputs, cotangents, wrt)
	if err != nil {
		return nil, nil, "", err
	}
	res, err := o.Eval(t, []WireCase{p.Case})
	if err != nil {
		return nil, nil, "", err
	}
	r := res[0]
	switch {
	case r.Unsupported:
		return nil, nil, "", errs.New(errs.Unsupported, "unsupported by oracle %s: %s", o.hello.Framework, r.Error)
	case r.Error != "":
		return nil, nil, "", errs.New(errs.Input, "oracle %s failed on the vjp of graph %s: %s", o.hello.Framework, g.Name, r.Error)
	}
	outs, grads, err = p.DecodeVJP(r)
	return outs, grads, joinMode(r.Mode, p.Transport.Note()), err
}
