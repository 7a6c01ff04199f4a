package harness

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Distribution kinds.
const (
	// DistNormal: mean (Lo+Hi)/2, standard deviation (Hi-Lo)/2; zero Lo and Hi mean N(0,1).
	// Drawn as a sum of 12 uniforms (Irwin-Hall), so values stay within 6 deviations.
	DistNormal = "normal"
	// DistUniform: uniform in [Lo, Hi); zero Lo and Hi mean [-1, 1).
	DistUniform = "uniform"
	// DistPositive: uniform in [Lo, Hi) with Lo > 0, for log, sqrt and rsqrt; zero Lo and Hi
	// mean [0.5, 2), which gives log values of both signs.
	DistPositive = "positive"
	// DistInt: integers uniform in [Lo, Hi] inclusive; zero Lo and Hi mean [-8, 8] ([0, 1]
	// for bool).
	DistInt = "int"
)

// Dist describes how RandomTensor draws values.
type Dist struct {
	Kind string  `json:"kind"`
	Lo   float64 `json:"lo,omitempty"`
	Hi   float64 `json:"hi,omitempty"`
}

// DefaultDist is the distribution for a random input of dtype dt: standard normal for floats,
// small integers for ints, both truth values for bool.
func DefaultDist(dt numerics.DType) Dist {
	if dt.IsFloat() {
		return Dist{Kind: DistNormal}
	}
	return Dist{Kind: DistInt}
}

// bounds returns the dist's range with the zero-value defaults applied.
func (d Dist) bounds(dt numerics.DType) (lo, hi float64) {
	if d.Lo != 0 || d.Hi != 0 {
		return d.Lo, d.Hi
	}
	switch {
	case d.Kind == DistPositive:
		return 0.5, 2
	case d.Kind == DistInt && dt == numerics.Bool:
		return 0, 1
	case d.Kind == DistInt:
		return -8, 8
	}
	return -1, 1
}

// Validate reports whether d can draw values of dtype dt. RandomTensor panics on a dist that
// fails it, so user-supplied dists must be validated first.
func (d Dist) Validate(dt numerics.DType) error {
	if !dt.Valid() {
		return errs.New(errs.DType, "random input: invalid dtype %s", dt)
	}
	if !dt.IsFloat() && d.Kind != DistInt {
		return errs.New(errs.Input, "random input: %s values need dist int, got %s", dt, d.Kind)
	}
	lo, hi := d.bounds(dt)
	if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return errs.New(errs.Input, "random input: dist %s range [%g, %g] is not finite", d.Kind, lo, hi)
	}
	switch d.Kind {
	case DistNormal, DistUniform:
		if lo > hi {
			return errs.New(errs.Input, "random input: dist %s has lo %g > hi %g", d.Kind, lo, hi)
		}
	case DistPositive:
		if lo > hi || numerics.Round(dt, lo) <= 0 {
			return errs.New(errs.Input, "random input: dist positive needs 0 < lo <= hi with lo positive in %s, got [%g, %g]", dt, lo, hi)
		}
	case DistInt:
		if lo > hi || lo != math.Trunc(lo) || hi != math.Trunc(hi) || hi-lo >= 1<<53 {
			return errs.New(errs.Input, "random input: dist int needs integers lo <= hi (span below 2^53), got [%g, %g]", lo, hi)
		}
	default:
		return errs.New(errs.Input, "random input: unknown dist kind %q (want normal, uniform, positive or int)", d.Kind)
	}
	return nil
}

func (d Dist) String() string {
	lo, hi := d.bounds(numerics.F32)
	return fmt.Sprintf("%s[%g,%g]", d.Kind, lo, hi)
}

// pcgStream is the fixed second PCG seed word: inputs depend on the seed alone.
const pcgStream = 0x7e55e4a0c0ffee01

// RandomTensor draws a tensor of dtype dt and shape from d, deterministically: the same seed
// gives the same bits on every machine and Go version, because only PCG's 64-bit outputs,
// integer sums, int->float conversions and explicitly rounded float operations are used
// (no library transcendental functions, no fusable multiply-adds). Values are rounded to dt
// by tensor.SetFloat64. The tensor is never all zeros: if every drawn value rounds to zero,
// element 0 is set to the smallest positive value of dt.
//
// RandomTensor panics when d.Validate(dt) fails or a dim is negative.
func RandomTensor(dt numerics.DType, shape []int, seed uint64, d Dist) *tensor.Tensor {
	if err := d.Validate(dt); err != nil {
		panic(err.Error())
	}
	for _, n := range shape {
		if n < 0 {
			panic(fmt.Sprintf("harness.RandomTensor: negative dim in shape %v", shape))
		}
	}
	t := tensor.New(dt, shape)
	src := rand.NewPCG(seed, pcgStream)
	lo, hi := d.bounds(dt)
	allZero := true
	for i := range t.Len() {
		t.SetFloat64(i, draw(src, d.Kind, lo, hi))
		allZero = allZero && t.Float64(i) == 0
	}
	if allZero && t.Len() > 0 {
		// Bit pattern 1 is the smallest positive subnormal of every float format, 1 for ints
		// and true for bool.
		t.SetBits(0, 1)
	}
	return t
}

func draw(src *rand.PCG, kind string, lo, hi float64) float64 {
	switch kind {
	case DistNormal:
		// Irwin-Hall: the sum of 12 uniforms on [0,1) has mean 6 and variance 1. The sum of
		// twelve 53-bit integers is exact in a uint64; scaling by 2^-53 is exact.
		var sum uint64
		for range 12 {
			sum += src.Uint64() >> 11
		}
		z := float64(sum)*0x1p-53 - 6
		return (lo+hi)/2 + float64((hi-lo)/2*z)
	case DistInt:
		span := uint64(hi-lo) + 1
		k, _ := bits.Mul64(src.Uint64(), span)
		return lo + float64(k)
	}
	u := float64(src.Uint64()>>11) * 0x1p-53
	return lo + float64((hi-lo)*u)
}

// SubSeed derives an independent seed for one named stream (an input tensor) from a case
// seed, so adding an input does not change the values drawn for the others.
func SubSeed(seed uint64, name string) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h := sha256.New()
	h.Write(b[:])
	h.Write([]byte(name))
	return binary.LittleEndian.Uint64(h.Sum(nil))
}

// RandomInputs draws every input of g: input v gets RandomTensor(v's type, SubSeed(seed,
// v.Name), dists[v.Name] or DefaultDist). A dist for a name that is not an input is an error.
func RandomInputs(g *graph.Graph, seed uint64, dists map[string]Dist) (map[string]*tensor.Tensor, error) {
	if g == nil {
		return nil, errs.New(errs.Input, "random inputs: nil graph")
	}
	for name := range dists {
		if v := g.Value(name); v == nil || !isInput(g, v) {
			return nil, errs.New(errs.Input, "random inputs: graph %s has no input %%%s", g.Name, name)
		}
	}
	out := make(map[string]*tensor.Tensor, len(g.Inputs))
	for _, v := range g.Inputs {
		d, ok := dists[v.Name]
		if !ok {
			d = DefaultDist(v.Type.DType)
		}
		if err := d.Validate(v.Type.DType); err != nil {
			return nil, errs.Wrap(errs.Input, err, "graph %s input %%%s", g.Name, v.Name)
		}
		if err := graph.CheckType(v.Type); err != nil {
			return nil, errs.Wrap(errs.Shape, err, "graph %s input %%%s", g.Name, v.Name)
		}
		out[v.Name] = RandomTensor(v.Type.DType, v.Type.Shape, SubSeed(seed, v.Name), d)
	}
	return out, nil
}

func isInput(g *graph.Graph, v *graph.Value) bool {
	for _, in := range g.Inputs {
		if in == v {
			return true
		}
	}
	return false
}
