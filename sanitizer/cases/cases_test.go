package cases

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/sanitizer"
)

// The case set covers every code path of the generator at least twice, each case with a
// ragged shape, and stays small enough for four tools in one device command.
func TestSelectCoversEveryPathWithRaggedShapes(t *testing.T) {
	cs, err := Select(2)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, c := range cs {
		for _, k := range uniq(c.Paths) {
			count[k]++
		}
	}
	for _, p := range AllPaths {
		if count[p] < 1 {
			t.Errorf("no case takes path %s (have %v)", p, count)
		}
	}
	for p := range count {
		if !slices.Contains(AllPaths, p) {
			t.Errorf("path %s is not in AllPaths: add it there", p)
		}
	}
	if len(cs) > 30 {
		t.Errorf("%d cases: too many for four tools in one device command", len(cs))
	}
	names := Names(cs)
	if u := uniq(names); len(u) != len(names) {
		t.Errorf("a case is listed twice: %v", names)
	}
	again, _ := Select(2)
	if !slices.Equal(Names(again), names) {
		t.Error("Select is not deterministic")
	}
	t.Logf("%d cases: %v; paths %v", len(cs), names, count)
}

// The child's side on the CPU backend (engine/ref judges it): every case passes and writes
// a case line the parent's parser reads back.
func TestRunWritesACaseLinePerCase(t *testing.T) {
	cs, err := Select(1)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if bad := Run(&out, cs, &cpu.Backend{}); bad != 0 {
		t.Errorf("%d cases fail on the CPU backend:\n%s", bad, out.String())
	}
	got := sanitizer.Cases(strings.Split(out.String(), "\n"))
	if len(got) != len(cs) {
		t.Fatalf("%d case lines for %d cases", len(got), len(cs))
	}
	for i, c := range got {
		if c.Name != cs[i].Name || c.Verdict != "pass" {
			t.Errorf("line %d: %+v", i, c)
		}
	}
}

func TestPerPath(t *testing.T) {
	env := map[string]string{}
	get := func(k string) string { return env[k] }
	if n, err := PerPath(get); n != 2 || err != nil {
		t.Errorf("default: %d %v", n, err)
	}
	env[PerPathEnv] = "1"
	if n, err := PerPath(get); n != 1 || err != nil {
		t.Errorf("1: %d %v", n, err)
	}
	for _, bad := range []string{"0", "9", "x", "1x", " 2"} {
		env[PerPathEnv] = bad
		if _, err := PerPath(get); err == nil || !strings.Contains(err.Error(), "E_INPUT") {
			t.Errorf("%q: %v, want E_INPUT", bad, err)
		}
	}
}

// The child on the CPU backend: right names run and pass (exit 0); an unknown name is exit 2
// with the error's line; OnPaths picks the cases of the paths named.
func TestChild(t *testing.T) {
	cs, err := Select(1)
	if err != nil {
		t.Fatal(err)
	}
	red := OnPaths(cs, "simt-reduce")
	if len(red) == 0 || slices.Contains(red, "ragged/exp/f32/7x13") {
		t.Fatalf("OnPaths(simt-reduce) = %v", red)
	}
	var out bytes.Buffer
	if code := Child(&out, strings.Join(red, ","), &cpu.Backend{}); code != 0 || len(sanitizer.Cases(strings.Split(out.String(), "\n"))) != len(red) {
		t.Errorf("exit %d:\n%s", code, out.String())
	}
	out.Reset()
	if code := Child(&out, "no/such", &cpu.Backend{}); code != 2 || !strings.Contains(out.String(), "E_INPUT") {
		t.Errorf("unknown name: exit %d %q", code, out.String())
	}
}

// Lookup builds the same cases Select chose, by name alone (a child with a planted fault on
// would select others), with the same inputs.
func TestLookupRebuildsTheSelectedCases(t *testing.T) {
	cs, err := Select(1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Lookup(Names(cs))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range got {
		if c.Name != cs[i].Name || c.Case.Seed != cs[i].Case.Seed || len(c.Case.Inputs) != len(cs[i].Case.Inputs) || len(c.Case.Tolerances) != len(cs[i].Case.Tolerances) {
			t.Errorf("case %d: %s seed %d, want %s seed %d", i, c.Name, c.Case.Seed, cs[i].Name, cs[i].Case.Seed)
		}
	}
	if _, err := Lookup([]string{"no/such"}); err == nil || !strings.Contains(err.Error(), "E_INPUT") {
		t.Errorf("unknown: %v", err)
	}
}

// The child judges a catalogue case as the golden suite does (its stored golden case, with the
// accumulator bound of fp8 scaled_matmul on cuda), whether it comes from Select or from the
// names the parent passes it: the H200 run of 2026-12-02 failed the fp8 case because the
// child's Lookup dropped it.
func TestCatalogueCasesKeepTheirGoldenCase(t *testing.T) {
	name := "scaled_matmul/fp8e4m3/33x48x64-f32-range"
	cs, err := Lookup([]string{name, "ragged/transpose/f32/68x132"})
	if err != nil {
		t.Fatal(err)
	}
	if cs[0].Golden == nil || cs[0].Golden.Name != name {
		t.Fatalf("Lookup(%s) has no stored golden case: %+v", name, cs[0].Golden)
	}
	if cs[1].Golden != nil {
		t.Fatalf("a dedicated case got a golden case")
	}
}
