package mesh

import (
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func mustLayout(t *testing.T, s string, rank int) Layout {
	t.Helper()
	l, err := ParseLayout(s, rank)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestShorthandLayoutsMeanMegatronColumnsAndRows(t *testing.T) {
	for _, c := range []struct {
		in   string
		rank int
		want string
	}{
		{"col:tp", 2, "[R,S(tp)]"},
		{"row:tp", 2, "[S(tp),R]"},
		{"col:tp", 1, "[S(tp)]"},
		{"col:tp", 3, "[R,R,S(tp)]"},
		{"row:tp", 3, "[R,S(tp),R]"},
		{"R", 2, "[R,R]"},
		{"rep", 0, "[]"},
		{"P(tp)", 2, "[R,R]+P(tp)"},
		{"[S(dp), R]", 2, "[S(dp),R]"},
		{"[R,S(tp)]+P(dp)", 2, "[R,S(tp)]+P(dp)"},
		{"row:tp+P(dp,pp)", 2, "[S(tp),R]+P(dp,pp)"},
		{"[]", 0, "[]"},
	} {
		l := mustLayout(t, c.in, c.rank)
		if l.String() != c.want {
			t.Errorf("ParseLayout(%q, %d) = %s, want %s", c.in, c.rank, l, c.want)
		}
		if back := mustLayout(t, l.String(), c.rank); !back.Equal(l) {
			t.Errorf("%s does not read back: %s", l, back)
		}
	}
}

func TestMalformedLayoutsGiveOneCodedLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		rank int
		code errs.Code
		want string
	}{
		{"", 2, errs.Parse, "empty"},
		{"col:", 2, errs.Parse, "not an identifier"},
		{"row:tp", 1, errs.Shape, "rank >= 2"},
		{"[S(dp),R", 2, errs.Parse, "missing ']'"},
		{"[S(dp)]", 2, errs.Shape, "describes 1 dims"},
		{"[X,R]", 2, errs.Parse, "not R or S(axis)"},
		{"[S(),R]", 2, errs.Parse, "not an identifier"},
		{"[S(tp),S(tp)]", 2, errs.Parse, "twice"},
		{"[S(tp),R]+P(tp)", 2, errs.Parse, "twice"},
		{"R+P()", 2, errs.Parse, "no axis"},
		{"diag:tp", 2, errs.Parse, "unknown form"},
		{strings.Repeat("R", 2000), 2, errs.Parse, "limit"},
	} {
		_, err := ParseLayout(c.in, c.rank)
		if errs.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseLayout(%q, %d) = %v, want %s containing %q", c.in, c.rank, err, c.code, c.want)
		}
	}
}

func TestAWorldThatDoesNotDivideAShardedDimIsAShapeErrorNamingTensorDimAndAxis(t *testing.T) {
	m := mustMesh(t, "dp=2,tp=4")
	_, err := m.LocalShape("W", mustLayout(t, "col:tp", 2), []int{8, 10})
	if errs.CodeOf(err) != errs.Shape || !strings.Contains(err.Error(), "tensor W: dim 1 (size 10) is not divisible by mesh axis tp (size 4)") {
		t.Fatalf("got %v", err)
	}
	if err := m.Check("X", mustLayout(t, "[S(pp),R]", 2), []int{4, 4}); errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), "axis pp") {
		t.Fatalf("unknown axis: %v", err)
	}
}

func TestLocalShapesAndOffsetsTileTheGlobalTensor(t *testing.T) {
	m := mustMesh(t, "dp=2,tp=2")
	l := mustLayout(t, "[S(dp),S(tp)]", 2)
	global := []int{6, 8}
	local, err := m.LocalShape("X", l, global)
	if err != nil || !slices.Equal(local, []int{3, 4}) {
		t.Fatalf("local %v, %v", local, err)
	}
	covered := map[[2]int]int{}
	for r := range m.World() {
		off := m.Offset(l, global, r)
		for i := range local[0] {
			for j := range local[1] {
				covered[[2]int{off[0] + i, off[1] + j}]++
			}
		}
	}
	if len(covered) != 48 {
		t.Fatalf("blocks cover %d of 48 elements", len(covered))
	}
	for k, n := range covered {
		if n != 1 {
			t.Fatalf("element %v held by %d ranks", k, n)
		}
	}
	if !slices.Equal(m.GlobalShape(l, local), global) {
		t.Fatal("GlobalShape is not LocalShape's inverse")
	}
	if m.Owners(mustLayout(t, "col:tp", 2)) != 2 || m.Owners(l) != 1 {
		t.Fatal("owners")
	}
}

func TestParseAssignment(t *testing.T) {
	n, l, err := ParseAssignment(" %W = col:tp ")
	if err != nil || n != "W" || l != "col:tp" {
		t.Fatalf("%q %q %v", n, l, err)
	}
	if _, _, err := ParseAssignment("col:tp"); errs.CodeOf(err) != errs.Parse {
		t.Fatalf("%v", err)
	}
}

func TestMovesSettleSumsThenMoveGatherAndChunk(t *testing.T) {
	plan := func(from, to string) string {
		ms, err := Moves(mustLayout(t, from, 2), mustLayout(t, to, 2))
		if err != nil {
			return err.Error()
		}
		var s []string
		for _, m := range ms {
			s = append(s, m.Op+":"+m.Axis)
		}
		return strings.Join(s, " ")
	}
	for _, c := range [][3]string{
		{"[R,S(tp)]", "[S(tp),R]", "all_to_all:tp"},
		{"[R,S(tp)]", "R", "all_gather:tp"},
		{"R", "[S(dp),S(tp)]", "chunk:dp chunk:tp"},
		{"[R,R]+P(tp)", "R", "all_reduce:tp"},
		{"[S(dp),R]+P(tp)", "[R,S(dp)]", "all_reduce:tp all_to_all:dp"},
		{"[S(dp),S(tp)]", "[S(tp),S(dp)]", "all_gather:dp all_to_all:tp chunk:dp"},
		{"[R,R]", "[R,R]", ""},
	} {
		if got := plan(c[0], c[1]); got != c[2] {
			t.Errorf("%s -> %s: %q, want %q", c[0], c[1], got, c[2])
		}
	}
	if _, err := Moves(Replicated(1), Layout{Dims: []string{""}, Partial: []string{"tp"}}); errs.CodeOf(err) != errs.Input {
		t.Fatalf("creating a pending sum: %v", err)
	}
}
