package harness

import (
	"math"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func TestRandomTensorDeterministic(t *testing.T) {
	for _, dt := range numerics.All {
		dists := []Dist{{Kind: DistInt}}
		if dt.IsFloat() {
			dists = append(dists, Dist{Kind: DistNormal}, Dist{Kind: DistUniform}, Dist{Kind: DistPositive})
		}
		for _, d := range dists {
			a := RandomTensor(dt, []int{3, 5}, 7, d)
			b := RandomTensor(dt, []int{3, 5}, 7, d)
			if a.Digest() != b.Digest() {
				t.Errorf("%s %s: same seed gave different bits", dt, d.Kind)
			}
			if c := RandomTensor(dt, []int{3, 5}, 8, d); dt != numerics.Bool && c.Digest() == a.Digest() {
				t.Errorf("%s %s: seeds 7 and 8 gave the same tensor", dt, d.Kind)
			}
		}
	}
}

// The drawn bits are part of every replay manifest and golden file: pin them, so that a change
// to the generator (or a platform that computes differently) is caught here and not as a
// mysterious golden-file diff.
func TestRandomTensorPinnedValues(t *testing.T) {
	n := RandomTensor(numerics.F64, []int{4}, 1, Dist{Kind: DistNormal})
	u := RandomTensor(numerics.F64, []int{4}, 1, Dist{Kind: DistUniform, Lo: 0, Hi: 1})
	k := RandomTensor(numerics.I32, []int{4}, 1, Dist{Kind: DistInt, Lo: -100, Hi: 100})
	for _, c := range []struct {
		name string
		got  *tensor.Tensor
		want []uint64
	}{
		{"normal", n, pinnedNormal},
		{"uniform", u, pinnedUniform},
		{"int", k, pinnedInt},
	} {
		for i, w := range c.want {
			if g := c.got.Bits(i); g != w {
				t.Errorf("%s[%d] = %#x (%g), pinned %#x", c.name, i, g, c.got.Float64(i), w)
			}
		}
	}
}

var (
	pinnedNormal  = []uint64{0xbfe48ada96585608, 0xbfc9bb1f6b237bc0, 0x3fe51acdd07dfab0, 0xbfddc0d0f235d510}
	pinnedUniform = []uint64{0x3fe63ec51f3ab131, 0x3faab841b3008770, 0x3feb955495b5054c, 0x3fba7a03e2275e88}
	pinnedInt     = []uint64{39, 0xffffffa6, 73, 0xffffffb0}
)

func TestRandomTensorDistributions(t *testing.T) {
	const n = 20000
	norm := RandomTensor(numerics.F64, []int{n}, 3, Dist{Kind: DistNormal}).Float64s()
	mean, std := moments(norm)
	if math.Abs(mean) > 0.03 || math.Abs(std-1) > 0.03 {
		t.Errorf("standard normal: mean %g std %g", mean, std)
	}
	shifted := RandomTensor(numerics.F64, []int{n}, 3, Dist{Kind: DistNormal, Lo: 8, Hi: 12}).Float64s()
	if mean, std := moments(shifted); math.Abs(mean-10) > 0.1 || math.Abs(std-2) > 0.1 {
		t.Errorf("normal [8,12]: mean %g std %g, want 10 and 2", mean, std)
	}
	for _, v := range RandomTensor(numerics.F32, []int{n}, 3, Dist{Kind: DistUniform, Lo: 2, Hi: 3}).Float64s() {
		if v < 2 || v > 3 {
			t.Fatalf("uniform [2,3): drew %g", v)
		}
	}
	for _, dt := range numerics.Floats {
		for _, v := range RandomTensor(dt, []int{1000}, 3, Dist{Kind: DistPositive}).Float64s() {
			if !(v > 0) {
				t.Fatalf("positive %s: drew %g", dt, v)
			}
		}
	}
	seen := map[float64]bool{}
	for _, v := range RandomTensor(numerics.I8, []int{1000}, 3, Dist{Kind: DistInt, Lo: -3, Hi: 3}).Float64s() {
		if v < -3 || v > 3 || v != math.Trunc(v) {
			t.Fatalf("int [-3,3]: drew %g", v)
		}
		seen[v] = true
	}
	if len(seen) != 7 {
		t.Errorf("int [-3,3]: saw %d distinct values, want all 7", len(seen))
	}
	b := RandomTensor(numerics.Bool, []int{1000}, 3, DefaultDist(numerics.Bool)).Float64s()
	if m, _ := moments(b); m < 0.4 || m > 0.6 {
		t.Errorf("bool: %g true, want about half", m)
	}
}

func TestRandomTensorNeverAllZero(t *testing.T) {
	// Every value of this range rounds to zero in f16 and fp8.
	for _, dt := range []numerics.DType{numerics.F16, numerics.F8E4M3, numerics.BF16} {
		x := RandomTensor(dt, []int{16}, 1, Dist{Kind: DistUniform, Lo: -1e-60, Hi: 1e-60})
		if oneValue(x) && x.Float64(0) == 0 {
			t.Errorf("%s: all zeros", dt)
		}
	}
	for seed := range uint64(64) {
		x := RandomTensor(numerics.Bool, []int{1}, seed, DefaultDist(numerics.Bool))
		if x.Bits(0) != 1 {
			t.Fatalf("bool scalar with seed %d is false", seed)
		}
	}
}

func TestDistValidate(t *testing.T) {
	bad := []struct {
		d  Dist
		dt numerics.DType
	}{
		{Dist{Kind: "gauss"}, numerics.F32},
		{Dist{Kind: DistUniform, Lo: 2, Hi: 1}, numerics.F32},
		{Dist{Kind: DistPositive, Lo: -1, Hi: 1}, numerics.F32},
		{Dist{Kind: DistPositive, Lo: 1e-10, Hi: 1}, numerics.F8E4M3}, // lo rounds to 0
		{Dist{Kind: DistInt, Lo: 0.5, Hi: 3}, numerics.I32},
		{Dist{Kind: DistNormal, Lo: math.Inf(-1)}, numerics.F32},
		{Dist{Kind: DistNormal}, numerics.Invalid},
		{Dist{Kind: DistNormal}, numerics.I32},
	}
	for _, c := range bad {
		if err := c.d.Validate(c.dt); err == nil {
			t.Errorf("%+v for %s: accepted", c.d, c.dt)
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("RandomTensor accepted an invalid dist")
			}
		}()
		RandomTensor(numerics.F32, []int{2}, 1, Dist{Kind: "gauss"})
	}()
}

func TestRandomInputs(t *testing.T) {
	b := graph.NewBuilder("g")
	x := b.Input("x", numerics.F32, 4, 4)
	y := b.Input("y", numerics.F32, 4, 4)
	b.Output(b.Op("add", nil, x, y))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	in, err := RandomInputs(g, 5, map[string]Dist{"y": {Kind: DistPositive}})
	if err != nil {
		t.Fatal(err)
	}
	if in["x"].Digest() == in["y"].Digest() {
		t.Error("x and y got the same values")
	}
	if want := RandomTensor(numerics.F32, []int{4, 4}, SubSeed(5, "x"), DefaultDist(numerics.F32)); in["x"].Digest() != want.Digest() {
		t.Error("x is not RandomTensor(SubSeed(seed, \"x\"))")
	}
	for _, v := range in["y"].Float64s() {
		if v <= 0 {
			t.Fatalf("y drew %g from a positive dist", v)
		}
	}
	if _, err := RandomInputs(g, 5, map[string]Dist{"z": {Kind: DistNormal}}); err == nil {
		t.Error("a dist for a non-input was accepted")
	}
	if _, err := RandomInputs(g, 5, map[string]Dist{"x": {Kind: "bad"}}); err == nil {
		t.Error("an invalid dist was accepted")
	}
}

func moments(v []float64) (mean, std float64) {
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	for _, x := range v {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(v)))
}
