package errs

import (
	"errors"
	"fmt"
	"testing"
)

func TestNewKeepsOneCodeTheInnermost(t *testing.T) {
	inner := New(Parse, "mesh %q: item 1 is not axis=size", "foo")
	for _, tc := range []struct {
		name string
		err  *Error
		want string
	}{
		{"coded arg", New(Input, "--mesh: %v", inner), `E_PARSE: --mesh: mesh "foo": item 1 is not axis=size`},
		{"coded arg with %s", New(Input, "%s (see help)", inner), `E_PARSE: mesh "foo": item 1 is not axis=size (see help)`},
		{"same code", New(Input, "chaos: %v", New(Input, "rank 7 outside world 3")), "E_INPUT: chaos: rank 7 outside world 3"},
		{"fmt wrapper", New(Input, "run: %v", fmt.Errorf("step 3: %w", inner)), `E_PARSE: run: step 3: mesh "foo": item 1 is not axis=size`},
		{"plain error", New(Input, "open: %v", errors.New("no such file")), "E_INPUT: open: no such file"},
		{"wrap of coded", Wrap(Input, inner, "compile %s", "g.tg"), `E_PARSE: compile g.tg: mesh "foo": item 1 is not axis=size`},
		{"wrap of wrapper", Wrap(Input, fmt.Errorf("layer: %w", inner), "compile"), `E_PARSE: compile: layer: mesh "foo": item 1 is not axis=size`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	if e := New(Input, "--mesh: %v", inner); !errors.Is(e, inner) {
		t.Error("New loses the coded cause for errors.Is")
	}
	args := []any{inner}
	_ = New(Input, "%v", args...)
	if args[0] != inner {
		t.Error("New edited the caller's argument slice")
	}
}

func TestLine(t *testing.T) {
	inner := New(Shape, "node 3 (matmul): [2,3] x [4,5]")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{inner, "E_SHAPE: node 3 (matmul): [2,3] x [4,5]"},
		{fmt.Errorf("compile g.tg: %w", inner), "E_SHAPE: compile g.tg: node 3 (matmul): [2,3] x [4,5]"},
		{errors.New("boom\nsecond line"), "E_INTERNAL: boom second line"},
	} {
		if got := Line(tc.err); got != tc.want {
			t.Errorf("Line(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
