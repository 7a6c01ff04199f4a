package property

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Templates are chosen by op kind, so a newly registered unary or binary op is generated
// without touching this file; kinds whose ops differ in arguments (movement, matmul) go by
// name, and an op no template knows is an error that TestEveryOpIsGenerated reports.

// positiveDomain lists ops whose fresh inputs should be positive (they are NaN below 0).
var positiveDomain = map[string]bool{"log": true, "sqrt": true, "rsqrt": true}

func (b *builder) apply(d *graph.OpDef) error {
	if b.spec.Edge != nil && len(b.g.Nodes) == 0 {
		return b.edge(*b.spec.Edge)
	}
	if err := knownAttrs(d); err != nil {
		return err
	}
	b.op = d
	var err error
	switch d.Kind {
	case graph.KindUnary:
		err = b.unary(d)
	case graph.KindBinary:
		err = b.binary(d)
	case graph.KindCast:
		err = b.cast(d)
	case graph.KindReduce:
		err = b.reduce(d)
	case graph.KindRowwise:
		err = b.rowwise(d)
	case graph.KindMatmul:
		err = b.matmul(d)
	case graph.KindAttention:
		err = b.attention(d)
	case graph.KindAttentionGrad:
		err = b.attentionGrad(d)
	case graph.KindMovement:
		err = b.movement(d)
	case graph.KindLoss:
		err = b.loss(d)
	case graph.KindSpectral, graph.KindComplex:
		err = b.spectral(d) // templates_spectral.go
	case graph.KindConv:
		err = b.conv(d) // templates_conv.go
	default:
		err = fmt.Errorf("no template for op kind %d of %s", d.Kind, d.Name)
	}
	return err
}

// templateAttrs are the attributes some template sets; an op requiring any other attribute
// cannot be generated until a template learns it.
var templateAttrs = []string{"to", "perm", "shape", "starts", "ends", "axis", "value", "wrt"}

func knownAttrs(d *graph.OpDef) error {
	for _, a := range d.Attrs {
		if a.Default == nil && !a.Optional && !slices.Contains(templateAttrs, a.Name) {
			return fmt.Errorf("op %s requires attribute %s, which no template sets", d.Name, a.Name)
		}
	}
	return nil
}

// operand returns the step's reused value that op d accepts with a rank in [minRank,
// maxRank], or a fresh input of d's dtype and a shape of such a rank.
func (b *builder) operand(d *graph.OpDef, minRank, maxRank int) *graph.Value {
	if v := b.pick(b.s.Src, func(v *graph.Value) bool {
		r := v.Type.Rank()
		return d.Supports(v.Type.DType) && r >= minRank && r <= maxRank
	}); v != nil {
		return v
	}
	c := b.class()
	if positiveDomain[d.Name] && (c == ClassNormal || c == ClassUniform) {
		c = ClassPositive
	}
	return b.input(b.dtype(d), b.emptied(d, b.shape(min(max(b.s.Rank+1, minRank), maxRank))), c)
}

// fullValues are the constants full_like draws: exact and inexact in every format, ties of
// bf16 and f16 (1+2^-8, 1+3*2^-11), beyond e4m3 and int8 (saturating), beyond f16 (+Inf in
// f16, saturated in fp8), a fraction ints truncate, and both zeros.
var fullValues = []float64{0.5, -3, 0.3, 1 + 1.0/256, -2.7, 1 + 3.0/2048, 300.7, -1000, 1e5, -0.75, 0, math.Copysign(0, -1)}

func (b *builder) unary(d *graph.OpDef) error {
	x := b.operand(d, 0, 4)
	var attrs graph.Attrs
	if d.Name == "gelu" && b.s.Attr[0]%2 == 1 {
		attrs = graph.Attrs{"approx": graph.String("tanh")}
	}
	if d.Name == "full_like" {
		attrs = graph.Attrs{"value": graph.Float(fullValues[b.s.Attr[0]%len(fullValues)])}
	}
	_, err := b.node(d.Name, attrs, x)
	return err
}

// binary broadcasts: the second operand is a reused value that broadcasts against the first,
// a near copy of the first (near-cancellation: x - y, or x + y for add, is a few ulps of x), or
// a fresh one whose shape is a suffix of the first's with some dims set to 1.
func (b *builder) binary(d *graph.OpDef) error {
	a := b.operand(d, 0, 4)
	y := b.pick(b.s.Src2, func(v *graph.Value) bool {
		s, err := graph.Broadcast(a.Type.Shape, v.Type.Shape)
		return err == nil && v != a && v.Type.DType == a.Type.DType && tensor.NumElems(s) <= b.cfg.MaxElems
	})
	switch {
	case y != nil:
	case b.s.Attr[2]%4 == 1 && a.Type.DType.IsFloat():
		y = b.inputOf(fmt.Sprintf("x%d", len(b.g.Inputs)), NearCopy(b.vals[a], d.Name == "add", b.s.Seed), b.class())
	default:
		as := a.Type.Shape
		s := slices.Clone(as[b.s.Attr[0]%(len(as)+1):])
		for i := range s {
			if b.s.Attr[1]>>i&1 == 1 {
				s[i] = 1
			}
		}
		y = b.input(a.Type.DType, s, b.class())
	}
	if b.s.Attr[2]&2 != 0 {
		a, y = y, a
	}
	_, err := b.node(d.Name, b.divMode(d, a, y), a, y)
	return err
}

// divMode draws div's rounding_mode (issue 21): none, "trunc" or "floor"; integers always get
// one (they have no true division). A float rounding division is a step function, so it only
// takes graph inputs: fed by a computed value, a one-ulp difference upstream that every
// tolerance allows could move a quotient across an integer and the result by a whole unit.
func (b *builder) divMode(d *graph.OpDef, a, y *graph.Value) graph.Attrs {
	if d.Name != "div" {
		return nil
	}
	modes := append([]string{""}, graph.DivRoundingModes...)
	mode := modes[b.s.Attr[3]%len(modes)]
	isInput := func(v *graph.Value) bool { return slices.Contains(b.g.Inputs, v) }
	switch {
	case a.Type.DType.IsInt() && mode == "":
		mode = graph.DivRoundingModes[b.s.Attr[3]%2]
	case a.Type.DType.IsFloat() && !(isInput(a) && isInput(y)):
		mode = ""
	}
	if mode == "" {
		return nil
	}
	return graph.Attrs{"rounding_mode": graph.String(mode)}
}

func (b *builder) cast(d *graph.OpDef) error {
	x := b.operand(d, 0, 4)
	var to []numerics.DType
	for _, dt := range dtypePref {
		if dt != x.Type.DType {
			to = append(to, dt)
		}
	}
	_, err := b.node(d.Name, graph.Attrs{"to": graph.DTypeAttr(to[b.s.Attr[0]%len(to)])}, x)
	return err
}

func (b *builder) reduce(d *graph.OpDef) error {
	x := b.operand(d, 0, 4)
	s := x.Type.Shape
	attrs := graph.Attrs{}
	var axes []int
	switch {
	case len(s) == 0: // a scalar: absent, [] or its one dim, 0 or -1 (issue 21)
		attrs["axes"] = graph.Ints([][]int64{nil, {}, {0}, {-1}}[b.s.Attr[0]%4]...)
		if b.s.Attr[0]%4 == 0 {
			delete(attrs, "axes")
		}
	case b.s.Attr[0]%4 == 3: // axes=[]: every axis (issue 21)
		attrs["axes"] = graph.Ints()
	}
	switch b.s.Attr[0] % 4 {
	case 0:
		axes = []int{len(s) - 1}
	case 1:
		for i := range s {
			if b.s.Attr[1]>>i&1 == 1 {
				axes = append(axes, i)
			}
		}
		if len(axes) == 0 {
			axes = []int{0}
		}
	}
	if axes != nil && len(s) > 0 {
		enc := make([]int64, len(axes))
		for i, ax := range axes {
			enc[i] = int64(ax)
			if b.s.Attr[2]&1 == 1 {
				enc[i] -= int64(len(s))
			}
		}
		attrs["axes"] = graph.Ints(enc...)
	}
	if b.s.Attr[2]&2 != 0 {
		attrs["keepdims"] = graph.Bool(true)
	}
	_, err := b.node(d.Name, b.accum(attrs, x.Type.DType), x)
	return err
}

// rowwise builds softmax-like ops (one input, an axis) and norms (x plus 1 or 2 parameter
// vectors of the last dim: a positive scale, then a shift).
func (b *builder) rowwise(d *graph.OpDef) error {
	x := b.operand(d, 1, 4)
	s := x.Type.Shape
	last := s[len(s)-1]
	attrs := graph.Attrs{}
	in := []*graph.Value{x}
	switch d.MinArgs {
	case 1:
		if b.s.Attr[3]%5 == 4 { // softmax of a scalar: axis 0 or -1 (issue 21)
			x = b.input(x.Type.DType, []int{}, b.class())
			in[0], s = x, []int{1}
		}
		ax := b.s.Attr[0] % len(s)
		if b.s.Attr[1]&1 == 1 {
			ax -= len(s)
		}
		attrs["axis"] = graph.Int(int64(ax))
	case 2, 3:
		in = append(in, b.input(x.Type.DType, []int{last}, ClassPositive))
		if d.MinArgs == 3 {
			in = append(in, b.input(x.Type.DType, []int{last}, ClassNormal))
		}
		if b.s.Attr[2]%4 == 1 {
			attrs["eps"] = graph.Float(1e-2)
		}
	default:
		return fmt.Errorf("no rowwise template for %d inputs (%s)", d.MinArgs, d.Name)
	}
	_, err := b.node(d.Name, b.accum(attrs, x.Type.DType), in...)
	return err
}

// tileSizes are the tile-hint edges a matmul may carry: small ones make many masked edge tiles.
var tileSizes = []int64{1, 2, 4, 8, 16, 32, 64}

func (b *builder) matmul(d *graph.OpDef) error {
	if d.Name == "scaled_matmul" {
		return b.scaledMatmul(d)
	}
	rank := map[string]int{"matmul": 2, "batch_matmul": 3}[d.Name]
	if rank == 0 {
		return fmt.Errorf("no matmul template for %s", d.Name)
	}
	ta, tb := b.s.Attr[0]&1 == 1, b.s.Attr[0]&2 != 0
	a := b.pick(b.s.Src, func(v *graph.Value) bool { return d.Supports(v.Type.DType) && v.Type.Rank() == rank })
	batch, m, k := 1+b.s.Dims[3]%3, b.dim(0), b.dim(1)
	if a != nil {
		s := a.Type.Shape
		m, k = s[rank-2], s[rank-1]
		if ta {
			m, k = k, m
		}
		if rank == 3 {
			batch = s[0]
		}
	}
	n := b.dim(2)
	fits := func() bool {
		return batch*m*n*k <= b.cfg.MaxWork && batch*max(m*n, m*k, k*n) <= b.cfg.MaxElems
	}
	for n > 1 && !fits() {
		n = (n + 1) / 2
	}
	if a != nil && !fits() {
		a = nil // the reused operand is too large for this op's budget
	}
	lead := []int{}
	if rank == 3 {
		lead = []int{batch}
	}
	if a == nil {
		for !fits() {
			switch {
			case m >= n && m >= k:
				m = (m + 1) / 2
			case k >= n:
				k = (k + 1) / 2
			default:
				n = (n + 1) / 2
			}
		}
		as := append(slices.Clone(lead), m, k)
		if ta {
			as = append(slices.Clone(lead), k, m)
		}
		a = b.input(b.dtype(d), as, b.class())
	}
	bs := append(slices.Clone(lead), k, n)
	if tb {
		bs = append(slices.Clone(lead), n, k)
	}
	y := b.pick(b.s.Src2, func(v *graph.Value) bool {
		return v.Type.DType == a.Type.DType && slices.Equal(v.Type.Shape, bs)
	})
	if y == nil {
		y = b.input(a.Type.DType, bs, b.class())
	}
	attrs := graph.Attrs{}
	if ta {
		attrs["transpose_a"] = graph.Bool(true)
	}
	if tb {
		attrs["transpose_b"] = graph.Bool(true)
	}
	if b.s.Attr[1]%4 == 1 {
		attrs["tile"] = graph.Ints(tileSizes[b.s.Attr[2]%7], tileSizes[b.s.Attr[3]%7], tileSizes[(b.s.Attr[1]/4)%7])
	}
	_, err := b.node(d.Name, b.accum(attrs, a.Type.DType), a, y)
	return err
}

// scaledMatmul: a [M,K] (a reused e4m3 value or fresh), b [N,K] fresh, two fresh positive f32
// scalar scales, the output dtype and a tile hint from the step's attribute choices.
func (b *builder) scaledMatmul(d *graph.OpDef) error {
	a := b.pick(b.s.Src, func(v *graph.Value) bool { return d.Supports(v.Type.DType) && v.Type.Rank() == 2 })
	m, k, n := b.dim(0), b.dim(1), b.dim(2)
	if a != nil {
		m, k = a.Type.Shape[0], a.Type.Shape[1]
	}
	fits := func() bool { return m*n*k <= b.cfg.MaxWork && max(m*n, m*k, k*n) <= b.cfg.MaxElems }
	for n > 1 && !fits() {
		n = (n + 1) / 2
	}
	if a != nil && !fits() {
		a = nil
	}
	for !fits() {
		if m >= k {
			m = (m + 1) / 2
		} else {
			k = (k + 1) / 2
		}
	}
	if a == nil {
		a = b.input(numerics.F8E4M3, []int{m, k}, b.class())
	}
	y := b.input(numerics.F8E4M3, []int{n, k}, b.class())
	sa, sb := b.input(numerics.F32, []int{}, ClassPositive), b.input(numerics.F32, []int{1}, ClassPositive)
	attrs := graph.Attrs{"out_dtype": graph.DTypeAttr(graph.ScaledMatmulOuts[b.s.Attr[0]%len(graph.ScaledMatmulOuts)])}
	if b.s.Attr[1]%4 == 1 {
		attrs["tile"] = graph.Ints(tileSizes[b.s.Attr[2]%7], tileSizes[b.s.Attr[3]%7], tileSizes[(b.s.Attr[1]/4)%7])
	}
	_, err := b.node(d.Name, attrs, a, y, sa, sb)
	return err
}

func (b *builder) attention(d *graph.OpDef) error {
	q := b.operand(d, 2, 4)
	r := q.Type.Rank()
	lead := slices.Clone(q.Type.Shape[:r-2])
	sq, dd := q.Type.Shape[r-2], q.Type.Shape[r-1]
	sk, dv := b.dim(1), b.dim(2)
	nb := tensor.NumElems(lead)
	for (sk > 1 || dv > 1) && (nb*sq*sk*(dd+dv) > b.cfg.MaxWork || nb*sk*max(dd, dv) > b.cfg.MaxElems || nb*sq*dv > b.cfg.MaxElems) {
		sk, dv = (sk+1)/2, (dv+1)/2
	}
	kk := b.input(q.Type.DType, append(slices.Clone(lead), sk, dd), b.class())
	v := b.input(q.Type.DType, append(slices.Clone(lead), sk, dv), b.class())
	attrs := graph.Attrs{}
	if b.s.Attr[0]&1 == 1 {
		attrs["causal"] = graph.Bool(true)
	}
	if b.s.Attr[1]%3 == 1 {
		attrs["scale"] = graph.Float(0.25)
	}
	_, err := b.node(d.Name, b.accum(attrs, q.Type.DType), q, kk, v)
	return err
}

// attentionGrad builds attention_lse(q, k) on fresh keys, or attention_grad (three nodes) as
// reverse mode emits it: o = attention(q, k, v) and lse = attention_lse(q, k) are nodes of the graph (so
// they are the forward's, as the op requires), do a fresh input of o's type, wrt q, k or v.
// The attributes (causal, scale, accum) are the forward's.
func (b *builder) attentionGrad(d *graph.OpDef) error {
	q := b.operand(d, 2, 4)
	r := q.Type.Rank()
	lead := slices.Clone(q.Type.Shape[:r-2])
	sq, dd := q.Type.Shape[r-2], q.Type.Shape[r-1]
	sk, dv := b.dim(1), b.dim(2)
	if d.Name == "attention_lse" {
		dv = 0
	}
	nb := tensor.NumElems(lead)
	// The backward does the forward's work about three times over (S, dP, and the gradient).
	for (sk > 1 || dv > 1) && (3*nb*sq*sk*(dd+dv) > b.cfg.MaxWork || nb*sk*max(dd, dv) > b.cfg.MaxElems || nb*sq*dv > b.cfg.MaxElems) {
		sk, dv = (sk+1)/2, (dv+1)/2
	}
	attrs := graph.Attrs{}
	if b.s.Attr[0]&1 == 1 {
		attrs["causal"] = graph.Bool(true)
	}
	if b.s.Attr[1]%3 == 1 {
		attrs["scale"] = graph.Float(0.25)
	}
	attrs = b.accum(attrs, q.Type.DType)
	kk := b.input(q.Type.DType, append(slices.Clone(lead), sk, dd), b.class())
	if d.Name != "attention_lse" && d.Name != "attention_grad" {
		return fmt.Errorf("no attention-gradient template for %s", d.Name)
	}
	// attention_grad adds three nodes; where the graph has no room for them (MaxOps counts
	// nodes), the step makes the statistics alone.
	if d.Name == "attention_lse" || len(b.g.Nodes)+3+b.stepsLeft > b.cfg.MaxOps {
		_, err := b.node("attention_lse", attrs, q, kk)
		return err
	}
	v := b.input(q.Type.DType, append(slices.Clone(lead), sk, dv), b.class())
	do := b.input(q.Type.DType, append(slices.Clone(lead), sq, dv), b.class())
	o, err := b.node("attention", attrs, q, kk, v)
	if err != nil {
		return err
	}
	lse, err := b.node("attention_lse", attrs, q, kk)
	if err != nil {
		return err
	}
	ga := maps.Clone(attrs)
	ga["wrt"] = graph.String([]string{"q", "k", "v"}[b.s.Attr[2]%3])
	_, err = b.node(d.Name, ga, q, kk, v, o, do, lse)
	return err
}

func (b *builder) movement(d *graph.OpDef) error {
	x := b.operand(d, 1, 4)
	s := x.Type.Shape
	r := len(s)
	// Index-like choices come from a stream seeded by the step, so they shrink with it.
	rng := rand.New(rand.NewPCG(b.s.Seed, uint64(b.s.Attr[0])))
	var attrs graph.Attrs
	in := []*graph.Value{x}
	switch d.Name {
	case "transpose":
		perm := rng.Perm(r)
		p := make([]int64, r)
		for i, v := range perm {
			p[i] = int64(v)
		}
		attrs = graph.Attrs{"perm": graph.Ints(p...)}
	case "reshape":
		to := []int64{-1}
		switch b.s.Attr[1] % 4 {
		case 1:
			to = []int64{int64(s[rng.IntN(r)]), -1}
		case 2:
			if r >= 2 {
				to = []int64{int64(s[0] * s[1])}
				for _, dd := range s[2:] {
					to = append(to, int64(dd))
				}
			}
		case 3:
			for _, f := range []int{3, 2} {
				if s[r-1]%f == 0 && s[r-1] > f {
					to = nil
					for _, dd := range s[:r-1] {
						to = append(to, int64(dd))
					}
					to = append(to, int64(f), -1)
					break
				}
			}
		}
		attrs = graph.Attrs{"shape": graph.Ints(to...)}
	case "slice":
		st, en := make([]int64, r), make([]int64, r)
		for i, dd := range s {
			lo := rng.IntN(dd)
			st[i], en[i] = int64(lo), int64(lo+1+rng.IntN(dd-lo))
		}
		attrs = graph.Attrs{"starts": graph.Ints(st...), "ends": graph.Ints(en...)}
	case "concat":
		ax := b.s.Attr[1] % r
		total := tensor.NumElems(s)
		for i := range 1 + b.s.Attr[2]%2 {
			if b.s.Attr[3]>>i&1 == 1 && total+tensor.NumElems(s) <= b.cfg.MaxElems {
				in = append(in, x)
				total += tensor.NumElems(s)
				continue
			}
			si := slices.Clone(s)
			si[ax] = b.dim(i + 1)
			for total+tensor.NumElems(si) > b.cfg.MaxElems && si[ax] > 1 {
				si[ax] = (si[ax] + 1) / 2
			}
			if total+tensor.NumElems(si) > b.cfg.MaxElems {
				break
			}
			in = append(in, b.input(x.Type.DType, si, b.class()))
			total += tensor.NumElems(si)
		}
		attrs = graph.Attrs{"axis": graph.Int(int64(ax))}
	default:
		return fmt.Errorf("no movement template for %s", d.Name)
	}
	_, err := b.node(d.Name, attrs, in...)
	return err
}

func (b *builder) loss(d *graph.OpDef) error {
	if d.MinArgs != 2 {
		return fmt.Errorf("no loss template for %d inputs (%s)", d.MinArgs, d.Name)
	}
	a := b.operand(d, 0, 4)
	var y *graph.Value
	if b.s.Attr[0]%3 == 1 {
		y = b.inputOf(fmt.Sprintf("x%d", len(b.g.Inputs)), NearCopy(b.vals[a], false, b.s.Seed), b.class())
	} else {
		y = b.input(a.Type.DType, slices.Clone(a.Type.Shape), b.class())
	}
	var attrs graph.Attrs
	if r := graph.MSEReductions[b.s.Attr[3]%len(graph.MSEReductions)]; r != "mean" {
		attrs = graph.Attrs{"reduction": graph.String(r)} // issue 21
	}
	_, err := b.node(d.Name, b.accum(attrs, a.Type.DType), a, y)
	return err
}
