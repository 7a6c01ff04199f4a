package gradients

import (
	"errors"
	"fmt"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/engine/autodiff"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Vs is an independent framework's autodiff (torch.autograd, jax.vjp) that the engine's
// gradients are compared with, beside the float64 references: Options.Vs.
type Vs struct {
	Oracle *differential.Oracle
	// Target is where the oracle computes: Device "cuda" when the engine runs on cuda. Native
	// should stay off: the oracle then computes in f64 at the engine's inputs and rounds each
	// gradient once to its dtype, the mathematical gradient the dtype's Tol is about.
	Target differential.Target
	// Batch is the number of cases per oracle request (0: differential.DefaultBatch).
	Batch int
}

// Framework is the oracle's framework name ("torch"), "" without an oracle.
func (v *Vs) Framework() string {
	if v == nil || v.Oracle == nil {
		return ""
	}
	return v.Oracle.Hello().Framework
}

// Statuses of an OracleVerdict.
const (
	OraclePass        = "pass"
	OracleFail        = "FAIL"
	OracleUnsupported = "unsupported" // the oracle cannot compute the case (Note says why)
	OracleError       = "error"       // the request or the answer failed (Note says why)
	OracleNA          = "n/a"         // no comparison exists for the case (Note says why)
)

// OracleVerdict is the comparison of one case's engine gradient with the oracle's: normwise
// per input, max|g - g_oracle| - ATol <= RTol * max|g_oracle|, under the case dtype's Tol.
type OracleVerdict struct {
	Framework string `json:"framework"`
	Device    string `json:"device,omitempty"`
	Status    string `json:"status"`
	Note      string `json:"note,omitempty"`
	// Mode is how the oracle computed the case (differential.WireResult.Mode).
	Mode   string        `json:"mode,omitempty"`
	Inputs []OracleInput `json:"inputs,omitempty"`
}

// OracleInput is one input's comparison with the oracle.
type OracleInput struct {
	Name    string  `json:"name"`
	NormErr float64 `json:"norm_err"`
	Fail    string  `json:"fail,omitempty"`
}

// failed reports whether the verdict fails its case: a disagreement, or a request that was
// asked for and could not be answered. Unsupported and n/a do not.
func (v *OracleVerdict) failed() bool {
	return v != nil && (v.Status == OracleFail || v.Status == OracleError)
}

// Options tune CheckAll and RunWith.
type Options struct {
	// Vs, when set, adds the oracle comparison to every single-device case; mesh cases say
	// that no comparison exists (OracleNA).
	Vs *Vs
	// Progress, when set, is called with each case's final result.
	Progress func(Result)
}

// pending is one case between its engine check and its oracle comparison.
type pending struct {
	c    Case
	f    caseFeed
	p    *differential.Prepared
	prep error // why the case could not be put on the wire
	// widened: the case went as its float64 graph (prepareVJP)
	widened bool
	res     Result
	grads   []*tensor.Tensor
}

// CheckAll checks every case on b, as Check does, and with o.Vs compares each engine gradient
// with the oracle's. The oracle gets its cases in batches (one request per o.Vs.Batch cases)
// and computes each batch while the engine checks it.
func CheckAll(b backend.Backend, cs []Case, o Options) []Result {
	out := make([]Result, 0, len(cs))
	emit := func(r Result) {
		if o.Progress != nil {
			o.Progress(r)
		}
		out = append(out, r)
	}
	if o.Vs == nil || o.Vs.Oracle == nil {
		for _, c := range cs {
			emit(Check(b, c))
		}
		return out
	}
	batch := o.Vs.Batch
	if batch <= 0 {
		batch = differential.DefaultBatch
	}
	for start := 0; start < len(cs); start += batch {
		for _, r := range o.Vs.checkBatch(b, cs[start:min(start+batch, len(cs))]) {
			emit(r)
		}
	}
	return out
}

// checkBatch sends the batch's gradient cases to the oracle and, while it computes, checks
// them on the engine; then compares.
func (v *Vs) checkBatch(b backend.Backend, cs []Case) []Result {
	ps := make([]*pending, len(cs))
	var wire []differential.WireCase
	var slot []int
	for i, c := range cs {
		p := &pending{c: c, f: feedOf(c)}
		ps[i] = p
		if d, ok := graph.Lookup(c.Op); !ok || d.Grad != nil {
			p.p, p.widened, p.prep = prepareVJP(c, p.f)
		}
		if p.p != nil {
			wire = append(wire, p.p.Case)
			slot = append(slot, i)
		}
	}
	type answer struct {
		res []differential.WireResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		a.res, a.err = v.Oracle.Eval(v.Target, wire)
		done <- a
	}()
	for _, p := range ps {
		p.res, p.grads = checkCase(b, p.c, p.f)
	}
	ans := <-done
	answers := make([]*differential.WireResult, len(cs))
	for k, i := range slot {
		if ans.err == nil && k < len(ans.res) {
			answers[i] = &ans.res[k]
		}
	}
	out := make([]Result, len(cs))
	for i, p := range ps {
		out[i] = v.judge(p, answers[i], ans.err)
	}
	return out
}

// widenedNote is the mode of a case sent as its float64 graph (prepareVJP).
const widenedNote = "sent as the float64 graph (fp8 intermediates cannot travel), gradients rounded by numerics.Encode"

// prepareVJP puts a case on the wire: its inputs, one cotangent per output (the engine's for
// float outputs, zeros for the others and for an output listed twice, which autodiff.VJP
// seeds once) and every float input as wrt, in input order like the engine's gradients.
//
// A graph with an fp8 intermediate cannot travel as it is (differential.PrepareVJP: the
// oracle would have to round fp8 between nodes). The oracle's default mode computes every node
// in float64 anyway, so such a case goes as its float64 graph (Retype) with the inputs and
// cotangents widened exactly; the answer is the same float64 gradient, and judge rounds it to
// the input's dtype itself. widened says so.
func prepareVJP(c Case, f caseFeed) (p *differential.Prepared, widened bool, err error) {
	cots := make([]*tensor.Tensor, len(c.Graph.Outputs))
	used := map[string]bool{}
	for i, o := range c.Graph.Outputs {
		name := autodiff.CotangentPrefix + o.Name
		if t := f.cots[name]; t != nil && !used[name] {
			cots[i], used[name] = t, true
			continue
		}
		cots[i] = tensor.New(o.Type.DType, o.Type.Shape)
	}
	p, err = differential.PrepareVJP(c.Name, c.Graph, c.Inputs, cots, f.wrt)
	if err == nil || errs.CodeOf(err) != errs.Unsupported || !hasFP8(c.Graph) {
		return p, false, err
	}
	g64, rerr := Retype(c.Graph, numerics.F64)
	if rerr != nil {
		return nil, false, err
	}
	for i, t := range cots {
		if t.DType.IsFloat() {
			cots[i] = tensor.FromFloat64(numerics.F64, t.Shape, t.Float64s())
		}
	}
	p, err = differential.PrepareVJP(c.Name, g64, widen(c.Inputs), cots, f.wrt)
	return p, err == nil, err
}

func hasFP8(g *graph.Graph) bool {
	is := func(v *graph.Value) bool { return v.Type.DType == numerics.F8E4M3 || v.Type.DType == numerics.F8E5M2 }
	for _, v := range g.Inputs {
		if is(v) {
			return true
		}
	}
	for _, n := range g.Nodes {
		if is(n.Output) {
			return true
		}
	}
	return false
}

// judge attaches the oracle's verdict to the engine's result.
func (v *Vs) judge(p *pending, w *differential.WireResult, reqErr error) Result {
	r := p.res
	ov := &OracleVerdict{Framework: v.Framework(), Device: v.Target.Device}
	r.Oracle = ov
	switch {
	case r.NoGrad != "":
		ov.Status, ov.Note = OracleNA, "no gradient"
		return r
	case r.Err != "" || p.grads == nil:
		ov.Status, ov.Note = OracleNA, "the engine's gradient is missing (see the case's error)"
		return r
	case p.prep != nil && errs.CodeOf(p.prep) == errs.Unsupported:
		ov.Status, ov.Note = OracleUnsupported, "cannot be sent: "+message(p.prep)
		return r
	case p.prep != nil:
		ov.Status, ov.Note = OracleError, "cannot be sent: "+message(p.prep)
	case reqErr != nil:
		ov.Status, ov.Note = OracleError, message(reqErr)
	case w == nil:
		ov.Status, ov.Note = OracleError, "no answer for the case"
	case w.Unsupported:
		ov.Status, ov.Note = OracleUnsupported, w.Error
		return r
	case w.Error != "":
		ov.Status, ov.Note = OracleError, w.Error
	default:
		ov.Mode = w.Mode
		_, grads, err := p.p.DecodeVJP(*w)
		if err != nil {
			ov.Status, ov.Note = OracleError, message(err)
			break
		}
		if p.widened {
			ov.Mode += "; " + widenedNote
			for i, g := range grads {
				grads[i] = tensor.FromFloat64(p.grads[i].DType, g.Shape, g.Float64s())
			}
		}
		tol := Tolerances[p.c.DType]
		if p.c.Tol != (Tol{}) {
			tol = p.c.Tol
		}
		ov.Status = OraclePass
		fw := ov.Framework
		if fw == "" {
			fw = "oracle"
		}
		for i, name := range p.f.wrt {
			in := OracleInput{Name: name, NormErr: normErr(p.grads[i].Float64s(), grads[i].Float64s(), tol.ATol)}
			if !(in.NormErr <= tol.RTol) {
				in.Fail = fmt.Sprintf("gradient of %%%s: max|g-g_%s| = %.3g of max|g_%s| (budget %.3g)", name, fw, in.NormErr, fw, tol.RTol)
				ov.Status = OracleFail
			}
			ov.Inputs = append(ov.Inputs, in)
		}
	}
	if ov.failed() {
		r.Pass = false
	}
	return r
}

// message is an error's text without its code.
func message(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Msg
	}
	return err.Error()
}
