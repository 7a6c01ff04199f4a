package mesh

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// oneCodedLine fails unless err is a coded E_PARSE/E_INPUT/E_SHAPE error on one line.
func oneCodedLine(t *testing.T, err error) {
	t.Helper()
	switch errs.CodeOf(err) {
	case errs.Parse, errs.Input, errs.Shape:
	default:
		t.Fatalf("error is not coded E_PARSE/E_INPUT/E_SHAPE: %v", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("error spans lines: %q", err)
	}
}

// FuzzParseMesh: ParseMesh never panics, errors are one coded line, and a parsed mesh prints
// to a string that parses back to the same axes. Run: go test -run=^$ -fuzz=FuzzParseMesh ./engine/dist/mesh
func FuzzParseMesh(f *testing.F) {
	for _, s := range []string{"dp=2,tp=2", "dp=4", " a = 1 , b=3", "dp=0", "dp=2,dp=2", "x=65536,y=2", "=,="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMesh(s)
		if err != nil {
			oneCodedLine(t, err)
			return
		}
		back, err := ParseMesh(m.String())
		if err != nil || !SameAxes(m, back) || back.String() != m.String() {
			t.Fatalf("%q -> %q does not read back: %v", s, m, err)
		}
		if m.World() < 1 || m.World() > MaxWorld || len(m.Devices) != m.World() {
			t.Fatalf("%q: world %d, %d devices", s, m.World(), len(m.Devices))
		}
	})
}

// FuzzParseLayout: ParseLayout never panics, errors are one coded line, and a parsed layout
// has the asked rank, validates, and prints to its general form, which reads back Equal.
func FuzzParseLayout(f *testing.F) {
	for _, s := range []string{"col:tp", "row:tp", "[S(dp),R]", "[R,S(tp)]+P(dp)", "P(tp)", "R", "[]", "[S(a),S(a)]", "row:tp+P(", "+P(x)"} {
		f.Add(s, 2)
	}
	f.Fuzz(func(t *testing.T, s string, rank int) {
		l, err := ParseLayout(s, rank)
		if err != nil {
			oneCodedLine(t, err)
			return
		}
		if l.Rank() != rank || l.Validate() != nil {
			t.Fatalf("%q (rank %d) -> %s: rank %d, validate %v", s, rank, l, l.Rank(), l.Validate())
		}
		back, err := ParseLayout(l.String(), rank)
		if err != nil || !back.Equal(l) {
			t.Fatalf("%q -> %s does not read back: %v %v", s, l, back, err)
		}
	})
}
