package numerics_test

import (
	"math"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

func TestRoundingNames(t *testing.T) {
	for _, r := range modes {
		got, err := numerics.ParseRounding(r.String())
		if err != nil || got != r {
			t.Errorf("ParseRounding(%q) = %v, %v", r.String(), got, err)
		}
	}
	if numerics.RoundNearestEven.String() != "rne" || numerics.RoundTowardZero.String() != "rtz" {
		t.Errorf("rounding names changed")
	}
	if _, err := numerics.ParseRounding("nearest"); errs.CodeOf(err) != errs.Parse {
		t.Errorf("ParseRounding(nearest) err = %v, want E_PARSE", err)
	}
	if numerics.Rounding(0).Valid() || numerics.Rounding(9).String() != "rounding(9)" {
		t.Errorf("zero/unknown rounding must be invalid and print its number")
	}
}

func TestDTypeParseIsCoded(t *testing.T) {
	if _, err := numerics.Parse("fp4"); errs.CodeOf(err) != errs.DType || !strings.Contains(err.Error(), `"fp4"`) {
		t.Errorf("Parse(fp4) err = %v, want E_DTYPE naming the input", err)
	}
}

func TestDefaultPolicy(t *testing.T) {
	wantAcc := map[numerics.DType]numerics.DType{
		numerics.F64: numerics.F64, numerics.F32: numerics.F32, numerics.F16: numerics.F32,
		numerics.BF16: numerics.F32, numerics.F8E4M3: numerics.F32, numerics.F8E5M2: numerics.F32,
		numerics.I8: numerics.I32, numerics.I32: numerics.I32, numerics.Bool: numerics.I32,
	}
	for _, d := range numerics.All {
		p := numerics.DefaultPolicy(d)
		if p.Accum != wantAcc[d] || p.Storage != d || p.Output != d || p.Rounding != numerics.RoundNearestEven {
			t.Errorf("DefaultPolicy(%s) = %s", d, p)
		}
		if err := p.Validate(); err != nil {
			t.Errorf("DefaultPolicy(%s).Validate() = %v", d, err)
		}
		back, err := numerics.ParsePolicy(p.String())
		if err != nil || back != p {
			t.Errorf("ParsePolicy(%q) = %v, %v", p.String(), back, err)
		}
	}
	if s := numerics.DefaultPolicy(numerics.BF16).String(); s != "bf16/acc=f32/out=bf16/rne" {
		t.Errorf("String() = %q", s)
	}
}

func TestPolicyValidateRejects(t *testing.T) {
	p := func(s, a, o numerics.DType, r numerics.Rounding) numerics.Policy {
		return numerics.Policy{Storage: s, Accum: a, Output: o, Rounding: r}
	}
	rne := numerics.RoundNearestEven
	bad := []numerics.Policy{
		p(numerics.F32, numerics.F8E4M3, numerics.F32, rne),
		p(numerics.F8E4M3, numerics.F8E4M3, numerics.F8E4M3, rne), // no fp8 accumulators at all
		p(numerics.F8E5M2, numerics.F8E5M2, numerics.F32, rne),
		p(numerics.F32, numerics.F16, numerics.F32, rne),
		p(numerics.F32, numerics.BF16, numerics.F32, rne),
		p(numerics.BF16, numerics.F16, numerics.BF16, rne),
		p(numerics.F16, numerics.BF16, numerics.F16, rne),
		p(numerics.F64, numerics.F32, numerics.F64, rne),
		p(numerics.F32, numerics.I32, numerics.F32, rne),
		p(numerics.I8, numerics.F32, numerics.I8, rne),
		p(numerics.I32, numerics.I8, numerics.I32, rne),
		p(numerics.I8, numerics.Bool, numerics.I8, rne),
		p(numerics.Invalid, numerics.F32, numerics.F32, rne),
		p(numerics.F32, numerics.DType(99), numerics.F32, rne),
		p(numerics.F32, numerics.F32, numerics.Invalid, rne),
		p(numerics.F32, numerics.F32, numerics.F32, 0),
		p(numerics.F32, numerics.F32, numerics.F32, 7),
	}
	for _, q := range bad {
		err := q.Validate()
		if errs.CodeOf(err) != errs.DType || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "policy ") {
			t.Errorf("Validate(%s) = %v, want a one-line E_DTYPE error naming the policy", q, err)
		}
	}
	good := []numerics.Policy{
		p(numerics.F16, numerics.F16, numerics.F16, rne),
		p(numerics.F8E4M3, numerics.F16, numerics.F8E4M3, rne),
		p(numerics.F8E5M2, numerics.BF16, numerics.F8E4M3, numerics.RoundTowardZero),
		p(numerics.I8, numerics.I8, numerics.F32, rne),
		p(numerics.Bool, numerics.I8, numerics.Bool, rne),
	}
	for _, q := range good {
		if err := q.Validate(); err != nil {
			t.Errorf("Validate(%s) = %v, want nil", q, err)
		}
	}
}

// The accumulator rule for floats must mean what it says: accepted exactly when every finite
// storage value survives a round trip through the accumulator.
func TestPolicyAccumulatorHoldsStorage(t *testing.T) {
	accs := []numerics.DType{numerics.F64, numerics.F32, numerics.F16, numerics.BF16}
	for _, s := range smallSpecs {
		for _, acc := range accs {
			holds := true
			for b := 0; b < s.count(); b++ {
				v := refDecode(s, uint64(b))
				if !math.IsNaN(v) && numerics.Round(acc, v) != v {
					holds = false
					break
				}
			}
			err := numerics.Policy{Storage: s.d, Accum: acc, Output: s.d, Rounding: numerics.RoundNearestEven}.Validate()
			if (err == nil) != holds {
				t.Errorf("storage %s, accumulator %s: Validate() = %v but every value holds = %v", s.d, acc, err, holds)
			}
		}
	}
}

func TestParsePolicyErrors(t *testing.T) {
	for _, s := range []string{"", "f32", "f32/f32/f32/rne", "f32/acc=f99/out=f32/rne", "f32/acc=f32/out=f32/up", "f32/acc=f32/out=f32/rne/x"} {
		if _, err := numerics.ParsePolicy(s); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParsePolicy(%q) = %v, want a one-line error", s, err)
		}
	}
}
