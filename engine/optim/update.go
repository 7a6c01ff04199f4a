package optim

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"sync"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Input and output names of every update graph. State buffers are inputs under their buffer
// name; new values are outputs named "<input>.new".
const (
	inParam = "param"
	inGrad  = "grad"
	newSfx  = ".new"
)

// computeDType is the dtype an update computes and keeps state in: f64 for f64 params, else
// f32 (16-bit params are cast up, see the package doc).
func computeDType(dt numerics.DType) numerics.DType {
	if dt == numerics.F64 {
		return numerics.F64
	}
	return numerics.F32
}

func paramDType(dt numerics.DType) bool {
	return dt == numerics.F64 || dt == numerics.F32 || dt == numerics.F16 || dt == numerics.BF16
}

func stateDType(dt numerics.DType) bool { return dt == numerics.F64 || dt == numerics.F32 }

// scalarIn is one scalar (shape []) input: its graph name, the hyper-parameter it carries and
// its dtype. An f32 update's scalars hold float32(value), also where an emulated fma needs the
// value as f64 (".f64" inputs).
type scalarIn struct {
	name, key string
	dt        numerics.DType
}

// ub builds one update graph over params of one dtype and shape.
type ub struct {
	name    string
	b       *graph.Builder
	shape   []int
	dt, cd  numerics.DType
	scalars []scalarIn
	byKey   map[string]*graph.Value // key -> scalar input in cd
	twin    map[*graph.Value]string // scalar input in cd -> its key, for the f64 twin
	outs    []*graph.Value
	outBufs []string
}

func newUB(name string, dt numerics.DType, shape []int) *ub {
	return &ub{name: name, b: graph.NewBuilder(name), shape: slices.Clone(shape), dt: dt, cd: computeDType(dt),
		byKey: map[string]*graph.Value{}, twin: map[*graph.Value]string{}}
}

// tensorIn declares a full-shape input.
func (u *ub) tensorIn(name string, dt numerics.DType) *graph.Value {
	return u.b.Input(name, dt, u.shape...)
}

// scalar returns the scalar input carrying hyper-parameter key, in the compute dtype.
func (u *ub) scalar(key string) *graph.Value {
	if v, ok := u.byKey[key]; ok {
		return v
	}
	v := u.b.Input(key, u.cd)
	u.scalars = append(u.scalars, scalarIn{name: key, key: key, dt: u.cd})
	u.byKey[key] = v
	u.twin[v] = key
	return v
}

// wide returns v as f64: a scalar's f64 twin input, else a cast.
func (u *ub) wide(v *graph.Value) *graph.Value {
	if v.Type.DType == numerics.F64 {
		return v
	}
	if key, ok := u.twin[v]; ok {
		name := key + ".f64"
		if w, ok := u.byKey[name]; ok {
			return w
		}
		w := u.b.Input(name, numerics.F64)
		u.scalars = append(u.scalars, scalarIn{name: name, key: key, dt: numerics.F64})
		u.byKey[name] = w
		return w
	}
	return u.cast(v, numerics.F64)
}

func (u *ub) op(op string, in ...*graph.Value) *graph.Value { return u.b.Op(op, nil, in...) }

func (u *ub) cast(v *graph.Value, dt numerics.DType) *graph.Value {
	if v.Type.DType == dt {
		return v
	}
	return u.b.Op("cast", graph.Attrs{"to": graph.DTypeAttr(dt)}, v)
}

func (u *ub) mul(a, b *graph.Value) *graph.Value { return u.op("mul", a, b) }
func (u *ub) add(a, b *graph.Value) *graph.Value { return u.op("add", a, b) }
func (u *ub) div(a, b *graph.Value) *graph.Value { return u.op("div", a, b) }

// fma is x*y + z rounded once, as torch's CPU kernels compute add_(alpha) and addcmul_ (see the
// package doc): in f64 for an f32 update, where the product of two f32 values is exact; as a
// multiply and an add (two roundings) for an f64 update, which has no wider type.
func (u *ub) fma(x, y, z *graph.Value) *graph.Value {
	if u.cd == numerics.F64 {
		return u.add(u.mul(x, y), z)
	}
	return u.cast(u.add(u.mul(u.wide(x), u.wide(y)), u.wide(z)), u.cd)
}

// output marks v as the new value of input buf ("param" or a state buffer); the param is
// rounded back to its dtype.
func (u *ub) output(buf string, v *graph.Value) {
	if buf == inParam {
		v = u.cast(v, u.dt)
	}
	v.Name = buf + newSfx
	u.outs = append(u.outs, v)
	u.outBufs = append(u.outBufs, buf)
}

// build finishes the graph.
func (u *ub) build() (*graph.Graph, error) {
	u.b.Output(u.outs...)
	return u.b.Build()
}

// update is one compiled update: the program, its scalar inputs and which buffer each output
// renews (outputs[0] is always the param).
type update struct {
	prog    *compiler.Program
	cd      numerics.DType
	scalars []scalarIn
	outBufs []string
}

// compileUpdate builds and compiles an update graph.
func compileUpdate(u *ub) (*update, error) {
	g, err := u.build()
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "optim: building the %s update of %s", u.name, tensor.TypeString(u.dt, u.shape))
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "optim: compiling %s", g.Name)
	}
	return &update{prog: p, cd: u.cd, scalars: u.scalars, outBufs: u.outBufs}, nil
}

// run feeds the named tensors and scalar values (keys of hyper-parameters, Python-double
// values) to the program and returns the outputs by buffer name.
func (up *update) run(b backend.Backend, ins map[string]*tensor.Tensor, vals map[string]float64) (map[string]*tensor.Tensor, error) {
	feed := make(map[string]*tensor.Tensor, len(ins)+len(up.scalars))
	for k, t := range ins {
		feed[k] = t
	}
	for _, s := range up.scalars {
		v, ok := vals[s.key]
		if !ok {
			return nil, errs.New(errs.Internal, "optim: no value for scalar %s of %s", s.key, up.prog.Graph.Name)
		}
		if up.cd == numerics.F32 {
			v = float64(float32(v)) // torch converts a Python scalar to the f32 tensor's dtype
		}
		feed[s.name] = tensor.FromFloat64(s.dt, nil, []float64{v})
	}
	outs, err := b.Run(up.prog, feed)
	if err != nil {
		return nil, err
	}
	res := make(map[string]*tensor.Tensor, len(outs))
	for i, t := range outs {
		res[up.outBufs[i]] = t
	}
	return res, nil
}

// programs caches compiled updates by optimizer, structure, dtype and shape.
var programs = struct {
	sync.Mutex
	m map[string]*update
}{m: map[string]*update{}}

// cached returns the update for key, compiling it with mk on first use.
func cached(key string, mk func() (*update, error)) (*update, error) {
	programs.Lock()
	defer programs.Unlock()
	if up, ok := programs.m[key]; ok {
		return up, nil
	}
	up, err := mk()
	if err != nil {
		return nil, err
	}
	programs.m[key] = up
	return up, nil
}

func cacheKey(kind, structure string, dt numerics.DType, shape []int) string {
	return fmt.Sprintf("%s|%s|%s", kind, structure, tensor.TypeString(dt, shape))
}

// powRN is b**n rounded once to float64, as CPython's b ** float(n) computes it through libm's
// pow (see the package doc): exact-enough binary powering in 256 bits, then one rounding.
func powRN(b float64, n int) float64 {
	const prec = 256
	r := new(big.Float).SetPrec(prec).SetFloat64(1)
	x := new(big.Float).SetPrec(prec).SetFloat64(b)
	for ; n > 0; n >>= 1 {
		if n&1 == 1 {
			r.Mul(r, x)
		}
		x.Mul(x, x)
	}
	f, _ := r.Float64()
	return f
}

// checkTensor verifies a tensor is present and its bytes fit its type.
func checkTensor(what string, t *tensor.Tensor) error {
	if t == nil {
		return errs.New(errs.Input, "optim: %s is nil", what)
	}
	if !t.DType.Valid() || slices.ContainsFunc(t.Shape, func(d int) bool { return d < 0 }) {
		return errs.New(errs.Input, "optim: %s has an invalid type %s", what, t.TypeString())
	}
	if len(t.Data) != t.Len()*t.DType.Size() {
		return errs.New(errs.Input, "optim: %s is %s but holds %d bytes, not %d", what, t.TypeString(), len(t.Data), t.Len()*t.DType.Size())
	}
	return nil
}

func sameType(a, b *tensor.Tensor) bool { return a.DType == b.DType && slices.Equal(a.Shape, b.Shape) }

// finite reports whether every hyper-parameter is a finite number.
func finite(vs ...float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}
