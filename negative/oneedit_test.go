package negative

import (
	"testing"

	"pgregory.net/rapid"
)

// TestBasesAreValid: every base runs and agrees with engine/ref unedited, so that a refusal
// after an edit is the edit's doing.
func TestBasesAreValid(t *testing.T) {
	for i, b := range Bases {
		if err := Judge(b, 1); err != nil {
			t.Errorf("base %d: %v", i, err)
		}
	}
}

func TestOneEditProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		base := rapid.IntRange(0, len(Bases)-1).Draw(rt, "base")
		e, err := OneEdit(Bases[base], func(n int) int { return rapid.IntRange(0, n-1).Draw(rt, "choice") })
		if err != nil {
			rt.Fatal(err)
		}
		if err := Judge(e.Text, rapid.Uint64().Draw(rt, "seed")); err != nil {
			rt.Fatalf("base %d, %s: %v\n%s", base, e.What, err, e.Text)
		}
	})
}
