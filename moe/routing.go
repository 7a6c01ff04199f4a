package moe

import (
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/training"
)

// RefRouting routes rank's groups (of world) of step 1's batch with the router's probabilities
// computed by engine/ref (the golden model, not a backend), as a backend named "ref" would: the
// routing a cpu or cuda run must reproduce, ties included.
func RefRouting(d training.MoEDims, dt numerics.DType, seed uint64, wr *tensor.Tensor, rank, world int) ([]*training.Routing, error) {
	x, _ := training.MoEBatch(d, dt, seed, 1, rank, world)
	b := graph.NewBuilder("moe_router_ref")
	xv := b.Input("x", dt, x.Shape...)
	wv := b.Input("wr", dt, wr.Shape...)
	b.Output(b.Op("softmax", nil, b.Op("matmul", nil, xv, wv)))
	g, err := b.Build()
	if err != nil {
		return nil, err
	}
	out, err := ref.Run(g, map[string]*tensor.Tensor{"x": x, "wr": wr})
	if err != nil {
		return nil, err
	}
	p := out[0].Float64s()
	E, Tg := d.Experts, d.GroupTokens
	C := training.Capacity(Tg, E, d.TopK, d.CapacityFactor)
	var rs []*training.Routing
	for g := range d.Groups / world {
		probs := make([][]float64, Tg)
		for t := range Tg {
			probs[t] = p[(g*Tg+t)*E : (g*Tg+t+1)*E]
		}
		rs = append(rs, training.Route(probs, d.TopK, C, "ref"))
	}
	return rs, nil
}

// SameRouting reports the first difference between two routings of the same groups ("" if none):
// every token's experts and slots.
func SameRouting(a, b []*training.Routing) string {
	if len(a) != len(b) {
		return "different numbers of groups"
	}
	for g := range a {
		for t := range a[g].Choices {
			for j, c := range a[g].Choices[t] {
				o := b[g].Choices[t][j]
				if c.Expert != o.Expert || c.Slot != o.Slot {
					return "group " + itoa(g) + " token " + itoa(t) + " choice " + itoa(j) + ": expert " + itoa(c.Expert) + " slot " + itoa(c.Slot) + " vs expert " + itoa(o.Expert) + " slot " + itoa(o.Slot)
				}
			}
		}
	}
	return ""
}

func itoa(i int) string {
	if i < 0 {
		return "-" + itoa(-i)
	}
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}
