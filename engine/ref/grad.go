package ref

import (
	"math"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func init() {
	impls["full_like"] = fullLike
	impls["sign"] = unaryOp(signF, func(x int64) int64 { return int64(min(max(x, -1), 1)) })
	impls["erf"] = unaryOp(math.Erf, nil)
	impls["attention_lse"] = attentionLSE
	impls["attention_grad"] = attentionGrad
}

// signF: NaN stays NaN, both zeros give +0.
func signF(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	case x == 0:
		return 0
	}
	return x
}

// fullLike rounds value the way cast rounds a float64 (numerics.Round: RNE, fp8 saturating,
// ints truncated and saturated).
func fullLike(n *graph.Node, _ []*tensor.Tensor, out *tensor.Tensor) error {
	v := numerics.Round(out.DType, n.FloatAttr("value"))
	for i := range out.Len() {
		if out.DType.IsFloat() {
			out.SetFloat64(i, v)
		} else {
			setInt(out, i, int64(v))
		}
	}
	return nil
}

// attnProblem is one attention node's inputs as float64 with its dims and attributes.
type attnProblem struct {
	q, k, v          []float64
	batch, sq, sk, d int
	dv               int
	scale            float64
	causal           bool
}

func attnOf(n *graph.Node, in []*tensor.Tensor) attnProblem {
	s := in[0].Shape
	r := len(s)
	p := attnProblem{q: floatsOf(in[0]), k: floatsOf(in[1]), batch: product(s[:r-2]), sq: s[r-2], d: s[r-1],
		sk: in[1].Shape[r-2], scale: 1 / math.Sqrt(float64(s[r-1])), causal: n.BoolAttr("causal")}
	if len(in) > 2 {
		p.v, p.dv = floatsOf(in[2]), in[2].Shape[r-1]
	}
	if n.HasAttr("scale") {
		p.scale = n.FloatAttr("scale")
	}
	return p
}

// scores fills row i of batch bt's scaled, masked scores into out (length sk).
func (p attnProblem) scores(bt, i int, out []float64) {
	qb, kb := p.q[(bt*p.sq+i)*p.d:], p.k[bt*p.sk*p.d:]
	for j := range p.sk {
		var dot float64
		for c := range p.d {
			dot += qb[c] * kb[j*p.d+c]
		}
		out[j] = dot * p.scale
		if p.causal && j > i {
			out[j] = math.Inf(-1)
		}
	}
}

func attentionLSE(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
	p := attnOf(n, in)
	res := make([]float64, p.batch*p.sq)
	row := make([]float64, p.sk)
	for bt := range p.batch {
		for i := range p.sq {
			p.scores(bt, i, row)
			m := math.Inf(-1)
			for _, x := range row {
				m = max(m, x)
			}
			if math.IsInf(m, -1) { // every score -Inf: log(0), not exp(-Inf - -Inf) = NaN
				res[bt*p.sq+i] = m
				continue
			}
			var sum float64
			for _, x := range row {
				sum += math.Exp(x - m)
			}
			res[bt*p.sq+i] = m + math.Log(sum)
		}
	}
	putFloats(out, res)
	return nil
}

// attentionGrad recomputes the probabilities and the output exactly from q, k and v (the o and
// lse inputs are the engine's saved values; the model does not trust them) and applies
//
//	dV = P^T dO,  dP = dO V^T,  dS = P*(dP - rowsum(dO*O)),  dQ = scale dS K,  dK = scale dS^T Q.
func attentionGrad(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
	p := attnOf(n, in)
	do := floatsOf(in[4])
	wrt := n.StringAttr("wrt")
	res := make([]float64, out.Len())
	probs := make([]float64, p.sk)
	for bt := range p.batch {
		kb, vb := p.k[bt*p.sk*p.d:], p.v[bt*p.sk*p.dv:]
		for i := range p.sq {
			p.scores(bt, i, probs)
			softmaxRow(probs)
			dob := do[(bt*p.sq+i)*p.dv:]
			var delta float64 // rowsum(dO*O) with O = P V
			for c := range p.dv {
				var o float64
				for j := range p.sk {
					o += probs[j] * vb[j*p.dv+c]
				}
				delta += dob[c] * o
			}
			for j := range p.sk {
				var dp float64
				for c := range p.dv {
					dp += dob[c] * vb[j*p.dv+c]
				}
				ds := probs[j] * (dp - delta) * p.scale
				switch wrt {
				case "v":
					for c := range p.dv {
						res[(bt*p.sk+j)*p.dv+c] += probs[j] * dob[c]
					}
				case "q":
					for c := range p.d {
						res[(bt*p.sq+i)*p.d+c] += ds * kb[j*p.d+c]
					}
				case "k":
					for c := range p.d {
						res[(bt*p.sk+j)*p.d+c] += ds * p.q[(bt*p.sq+i)*p.d+c]
					}
				}
			}
		}
	}
	putFloats(out, res)
	return nil
}
