package ref

import (
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Movement ops copy element bit patterns, so they are exact for every dtype (NaN payloads and
// -0 included) and never round.

func transpose(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
	x := in[0]
	perm := n.IntsAttr("perm")
	inStrides := tensor.Strides(x.Shape)
	strides := make([]int, len(perm)) // input stride of each output axis
	for i, p := range perm {
		strides[i] = inStrides[p]
	}
	for o := range out.Len() {
		out.SetBits(o, x.Bits(index(o, out.Shape, strides)))
	}
	return nil
}

// reshape keeps the row-major element order; the output shape was resolved by type inference.
func reshape(_ *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
	copy(out.Data, in[0].Data)
	return nil
}

func sliceOp(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
	x := in[0]
	starts := n.IntsAttr("starts")
	strides := tensor.Strides(x.Shape)
	base := 0
	for d, s := range starts {
		base += s * strides[d]
	}
	for o := range out.Len() {
		out.SetBits(o, x.Bits(base+index(o, out.Shape, strides)))
	}
	return nil
}

// concat copies, for each index over the axes before `axis`, one contiguous block per input.
func concat(n *graph.Node, in []*tensor.Tensor, out *tensor.Tensor) error {
	ax, _ := graph.NormAxis(int(n.IntAttr("axis")), len(out.Shape)) // checked by inference
	size := out.DType.Size()
	inner := product(out.Shape[ax+1:]) * size
	pos := 0
	for o := range product(out.Shape[:ax]) {
		for _, t := range in {
			block := t.Shape[ax] * inner
			pos += copy(out.Data[pos:], t.Data[o*block:(o+1)*block])
		}
	}
	return nil
}
