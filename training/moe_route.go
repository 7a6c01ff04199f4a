package training

import (
	"math"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/failpoint"
)

// Routing of a mixture-of-experts layer, on the host: the router's probabilities come from a
// compiled graph, the choices from here, so that every backend routes a tie the same way.

// Choice is one token's j-th expert and where it landed.
type Choice struct {
	Expert int
	Gate   float64 // the router probability of the expert (the combine weight)
	Slot   int     // position in the expert's capacity buffer of the group; -1: dropped
}

// Routing is one group's routing: Choices[t][j] for token t's j-th choice, Count[e] the tokens
// expert e took (<= Capacity), Top1[e] the tokens whose first choice is e (the aux loss's f).
type Routing struct {
	Choices  [][]Choice
	Count    []int
	Top1     []int
	Capacity int
}

// Capacity is the slots per expert of a group of tokens: ceil(k x tokens / experts x factor).
func Capacity(tokens, experts, k int, factor float64) int {
	return int(math.Ceil(float64(k*tokens) / float64(experts) * factor))
}

// TopK returns the indices of the k largest of p, largest first; equal values go to the lower
// index first (a fixed rule, so exact ties route the same on every backend). backend names the
// backend that computed p: it changes nothing, except under the planted fault
// dist/moe/tie-break-by-backend, where the cpu backend breaks ties to the higher index.
func TopK(p []float64, k int, backend string) []int {
	idx := make([]int, len(p))
	for i := range idx {
		idx[i] = i
	}
	higherFirst := backend == "cpu" && failpoint.Enabled(failpoint.DistMoETieBreakByBackend)
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case p[a] > p[b]:
			return -1
		case p[a] < p[b]:
			return 1
		case higherFirst:
			return b - a
		}
		return a - b
	})
	return idx[:k]
}

// Route routes one group: probs[t] is token t's router distribution over the experts. The
// slots are filled choice by choice (every token's first choice, in token order, then every
// second choice ...), as GShard does, so a first choice is never dropped for a second; a token
// whose expert is full is dropped for that choice.
func Route(probs [][]float64, k, capacity int, backend string) *Routing {
	E := len(probs[0])
	r := &Routing{Choices: make([][]Choice, len(probs)), Count: make([]int, E), Top1: make([]int, E), Capacity: capacity}
	top := make([][]int, len(probs))
	for t, p := range probs {
		top[t] = TopK(p, k, backend)
		r.Top1[top[t][0]]++
		r.Choices[t] = make([]Choice, k)
	}
	for j := range k {
		for t := range probs {
			e := top[t][j]
			c := Choice{Expert: e, Gate: probs[t][e], Slot: -1}
			if r.Count[e] < capacity {
				c.Slot = r.Count[e]
				r.Count[e]++
			}
			r.Choices[t][j] = c
		}
	}
	return r
}

// AuxLoss is Switch Transformer's load-balancing loss of a group, E x sum_e f_e P_e (f_e the
// fraction of tokens whose first choice is e, P_e the mean router probability of e), and its
// gradient with respect to every probs[t][e]: E f_e / tokens (f is a count, not differentiated).
func AuxLoss(probs [][]float64, r *Routing) (float64, []float64) {
	T, E := len(probs), len(probs[0])
	var loss float64
	grad := make([]float64, E)
	for e := range E {
		f := float64(r.Top1[e]) / float64(T)
		var P float64
		for t := range T {
			P += probs[t][e]
		}
		P /= float64(T)
		loss += f * P
		grad[e] = float64(E) * f / float64(T)
	}
	return float64(E) * loss, grad
}
