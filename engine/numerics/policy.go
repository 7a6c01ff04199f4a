package numerics

import (
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Policy is the numerics contract of a kernel: elements are stored as Storage, sums and
// products are carried in Accum, results are written as Output, and every narrowing
// conversion rounds with Rounding.
type Policy struct {
	Storage, Accum, Output DType
	Rounding               Rounding
}

// DefaultPolicy accumulates f64 in f64, other floats in f32 (what tensor cores do), ints and
// bool in int32, writes the storage dtype and rounds to nearest even.
func DefaultPolicy(storage DType) Policy {
	acc := F32
	switch {
	case storage == F64:
		acc = F64
	case storage.IsInt() || storage == Bool:
		acc = I32
	}
	return Policy{Storage: storage, Accum: acc, Output: storage, Rounding: RoundNearestEven}
}

// Validate returns an E_DTYPE error unless every dtype is valid, the rounding is rne or rtz,
// and the accumulator holds every storage value exactly: a float accumulator for float
// storage (never fp8, which no hardware accumulates in), an int accumulator for int or bool
// storage. The output dtype is free: writing it is one more rounding step.
func (p Policy) Validate() error {
	for _, f := range []struct {
		role string
		d    DType
	}{{"storage", p.Storage}, {"accumulator", p.Accum}, {"output", p.Output}} {
		if !f.d.Valid() {
			return errs.New(errs.DType, "policy %s: invalid %s dtype %s", p, f.role, f.d)
		}
	}
	if !p.Rounding.Valid() {
		return errs.New(errs.DType, "policy %s: invalid rounding %s (want rne or rtz)", p, p.Rounding)
	}
	switch {
	case p.Accum == F8E4M3 || p.Accum == F8E5M2 || p.Accum == Bool:
		return errs.New(errs.DType, "policy %s: %s cannot be an accumulator", p, p.Accum)
	case p.Storage.IsFloat() != p.Accum.IsFloat():
		return errs.New(errs.DType, "policy %s: %s storage needs a %s accumulator, got %s",
			p, p.Storage, kindName(p.Storage), p.Accum)
	case !holdsExactly(p.Accum, p.Storage):
		return errs.New(errs.DType, "policy %s: accumulator %s cannot hold every %s value exactly",
			p, p.Accum, p.Storage)
	}
	return nil
}

func kindName(d DType) string {
	if d.IsFloat() {
		return "float"
	}
	return "integer"
}

// holdsExactly reports whether every value of narrow is a value of wide. For floats it is
// enough that wide has at least as many mantissa bits, reaches at least as high and at
// least as deep into the subnormals, and has Inf if narrow has it.
func holdsExactly(wide, narrow DType) bool {
	fw, fn := formatOf(wide), formatOf(narrow)
	if fw != nil && fn != nil {
		return fw.manBits >= fn.manBits && MaxFinite(wide) >= MaxFinite(narrow) &&
			fw.minSubExp() <= fn.minSubExp() && (fw.hasInf || !fn.hasInf)
	}
	if fw != nil || fn != nil {
		return false
	}
	return MaxFinite(wide) >= MaxFinite(narrow) // Bool ⊂ I8 ⊂ I32
}

// String prints p as "storage/acc=A/out=O/rounding", e.g. "bf16/acc=f32/out=bf16/rne".
func (p Policy) String() string {
	return p.Storage.String() + "/acc=" + p.Accum.String() + "/out=" + p.Output.String() + "/" + p.Rounding.String()
}

// ParsePolicy reads the form String prints. It checks the syntax and names only; call
// Validate for the combination.
func ParsePolicy(s string) (Policy, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 4 || !strings.HasPrefix(parts[1], "acc=") || !strings.HasPrefix(parts[2], "out=") {
		return Policy{}, errs.New(errs.Parse, "policy %q: want storage/acc=DTYPE/out=DTYPE/rne|rtz", s)
	}
	var p Policy
	var err error
	for _, f := range []struct {
		dst  *DType
		text string
	}{{&p.Storage, parts[0]}, {&p.Accum, parts[1][len("acc="):]}, {&p.Output, parts[2][len("out="):]}} {
		if *f.dst, err = Parse(f.text); err != nil {
			return Policy{}, errs.Wrap(errs.Parse, err, "policy %q", s)
		}
	}
	if p.Rounding, err = ParseRounding(parts[3]); err != nil {
		return Policy{}, errs.Wrap(errs.Parse, err, "policy %q", s)
	}
	return p, nil
}
