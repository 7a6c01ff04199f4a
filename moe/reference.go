// Package moe checks the mixture-of-experts model of training (issue 27) against an
// independent float64 reference of its forward pass: the router's softmax, top-k with ties to
// the lower expert, capacity per expert and group filled choice by choice, the gated experts,
// the residual, mse against the target and Switch Transformer's load-balancing loss. Its
// central differences check the engine's gradients. Nothing here shares code with
// training/moe*.go but the model's definition (sizes, parameter names, data).
package moe

import (
	"math"
	"strconv"

	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/training"
)

// Loss is the model's loss on the whole batch (x, target: [tokens, width]) in float64.
func Loss(d training.MoEDims, params map[string][]float64, x, target []float64) float64 {
	W, E, F, Tg := d.Width, d.Experts, d.FFN, d.GroupTokens
	capacity := int(math.Ceil(float64(d.TopK*Tg) / float64(E) * d.CapacityFactor))
	var sq, aux float64
	for g := range d.Groups {
		probs := make([][]float64, Tg)
		for t := range Tg {
			row := x[(g*Tg+t)*W : (g*Tg+t+1)*W]
			logits := make([]float64, E)
			mx := math.Inf(-1)
			for e := range E {
				for i := range W {
					logits[e] += row[i] * params["wr"][i*E+e]
				}
				mx = math.Max(mx, logits[e])
			}
			var sum float64
			for e := range E {
				logits[e] = math.Exp(logits[e] - mx)
				sum += logits[e]
			}
			for e := range E {
				logits[e] /= sum
			}
			probs[t] = logits
		}
		// choice j of token t: the j-th largest, lower index first among equals.
		choice := make([][]int, Tg)
		for t := range Tg {
			taken := make([]bool, E)
			for range d.TopK {
				best := -1
				for e := range E {
					if !taken[e] && (best < 0 || probs[t][e] > probs[t][best]) {
						best = e
					}
				}
				taken[best] = true
				choice[t] = append(choice[t], best)
			}
		}
		used := make([]int, E)
		y := make([][]float64, Tg)
		for t := range y {
			y[t] = make([]float64, W)
		}
		for j := range d.TopK {
			for t := range Tg {
				e := choice[t][j]
				if used[e] >= capacity {
					continue
				}
				used[e]++
				out := expert(x[(g*Tg+t)*W:(g*Tg+t+1)*W], params[w(1, e)], params[w(2, e)], W, F)
				for i := range W {
					y[t][i] += probs[t][e] * out[i]
				}
			}
		}
		for t := range Tg {
			for i := range W {
				k := (g*Tg+t)*W + i
				diff := x[k] + y[t][i] - target[k]
				sq += diff * diff
			}
		}
		var a float64
		for e := range E {
			top1, p := 0, 0.0
			for t := range Tg {
				if choice[t][0] == e {
					top1++
				}
				p += probs[t][e]
			}
			a += float64(top1) / float64(Tg) * p / float64(Tg)
		}
		aux += float64(E) * a
	}
	return sq/float64(d.Groups*Tg*W) + d.AuxWeight*aux/float64(d.Groups)
}

func w(layer, e int) string { return "w" + strconv.Itoa(layer) + "_" + strconv.Itoa(e) }

func expert(x, w1, w2 []float64, W, F int) []float64 {
	h := make([]float64, F)
	for f := range F {
		for i := range W {
			h[f] += x[i] * w1[i*F+f]
		}
		h[f] = 0.5 * h[f] * (1 + math.Erf(h[f]/math.Sqrt2))
	}
	out := make([]float64, W)
	for i := range W {
		for f := range F {
			out[i] += h[f] * w2[f*W+i]
		}
	}
	return out
}

// Float64s turns tensors into float64 slices.
func Float64s(ts map[string]*tensor.Tensor) map[string][]float64 {
	out := map[string][]float64{}
	for k, t := range ts {
		out[k] = t.Float64s()
	}
	return out
}

// Probe is one gradient element checked by central differences.
type Probe struct {
	Param     string
	Index     int
	Numerical float64 // (L(p+h) - L(p-h)) / 2h in float64
	Engine    float64
}

// CentralDifferences is the numerical gradient of Loss at every n-th element of every
// parameter (n >= 1), next to the engine's gradient there.
func CentralDifferences(d training.MoEDims, params map[string][]float64, x, target []float64, grads map[string]*tensor.Tensor, every int, h float64) []Probe {
	var out []Probe
	for _, name := range training.MoEParams(d) {
		p := params[name]
		for i := 0; i < len(p); i += every {
			v := p[i]
			p[i] = v + h
			up := Loss(d, params, x, target)
			p[i] = v - h
			down := Loss(d, params, x, target)
			p[i] = v
			out = append(out, Probe{Param: name, Index: i, Numerical: (up - down) / (2 * h), Engine: grads[name].Float64(i)})
		}
	}
	return out
}
