package gpucheck

import (
	"context"
	"testing"
)

// The host communicator as the "device": every check must pass, which validates the float64
// budgets against the very arithmetic the device transports reproduce.
func TestMatrixPassesOnTheHost(t *testing.T) {
	for _, n := range []int{2, 4} {
		for _, c := range Matrix(n) {
			if c.Count > 1023 {
				continue
			}
			host := func(ctx context.Context, c Case, send []byte, recvBytes int) ([]byte, error) {
				ins := make([][]byte, n)
				for r := range n {
					ins[r] = c.Input(1, r, n)
				}
				return Host(ctx, c, ins, 1)
			}
			res, err := Run(context.Background(), c, 1, n, 1, 2, host)
			if err != nil {
				t.Fatal(err)
			}
			if !res.OK() {
				t.Errorf("world %d: %s", n, res)
			}
		}
	}
}

func TestInputsDifferAcrossRanksAndCases(t *testing.T) {
	cs := Matrix(2)
	x := cs[14] // f32 all_reduce sum of 1023
	if x.Count != 1023 {
		t.Fatalf("case 14 is %s", x)
	}
	a, b, c := x.Input(1, 0, 2), x.Input(1, 1, 2), cs[15].Input(1, 0, 2)
	if string(a) == string(b) || string(a) == string(c) {
		t.Error("inputs repeat across ranks or cases")
	}
	for i := 0; i+4 <= len(a); i += 4 {
		if a[i] == 0 && a[i+1] == 0 && a[i+2] == 0 && a[i+3] == 0 {
			t.Fatalf("zero input at %d", i/4)
		}
	}
}
