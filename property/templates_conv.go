package property

import "github.com/tessera-qa/tessera-qa/engine/graph"

// conv generates conv1d/conv2d (issue 26) on fresh uniform inputs with drawn stride,
// padding, dilation and groups (1 or 2), and a bias half the time.
func (b *builder) conv(d *graph.OpDef) error {
	a := b.s.Attr
	g := 1 + a[0]%2
	c, co := g*(1+a[1]%2), g*(1+a[2]%3)
	k := 1 + a[3]%3
	dt := b.dtype(d)
	xs, ws := []int{1 + a[1]%2, c, 9 + a[2]%5}, []int{co, c / g, k}
	if d.Name == "conv2d" {
		xs, ws = []int{1, c, 5 + a[0]%3, 6 + a[3]%3}, []int{co, c / g, k, 1 + a[1]%2}
	}
	attrs := graph.Attrs{"stride": graph.Ints(int64(1 + a[1]%2)), "padding": graph.Ints(int64(a[2] % 2)),
		"dilation": graph.Ints(int64(1 + a[3]%2)), "groups": graph.Int(int64(g))}
	in := []*graph.Value{b.input(dt, xs, ClassUniform), b.input(dt, ws, ClassUniform)}
	if a[0]%4 < 2 {
		in = append(in, b.input(dt, []int{co}, ClassUniform))
	}
	_, err := b.node(d.Name, attrs, in...)
	return err
}
