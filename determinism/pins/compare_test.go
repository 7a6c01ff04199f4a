package pins

import (
	"reflect"
	"testing"
)

func TestCompareListsEveryChangedAddedAndMissingCase(t *testing.T) {
	f := file("cpu/amd64", map[string][]string{"b": {"b"}, "a": {"a"}, "gone": {"g"}, "two": {"t0", "t1"}, "z": {"z"}})
	got := map[string][]string{
		"a": {digest("a")}, "b": {digest("b2")}, "two": {digest("t0"), digest("t1x")}, "z": {digest("z")}, "new": {digest("n")},
	}
	d := Compare(f, got)
	want := Diff{
		Changed: []Change{{Case: "b", Pinned: []string{digest("b")}, Got: []string{digest("b2")}},
			{Case: "two", Pinned: []string{digest("t0"), digest("t1")}, Got: []string{digest("t0"), digest("t1x")}}},
		Added: []string{"new"}, Missing: []string{"gone"}, Same: 2,
	}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("Compare = %+v\nwant      %+v", d, want)
	}
	if d.Empty() {
		t.Error("a diff with changes is Empty")
	}
	if c := d.Changed[0]; c.PinnedDigest() != f.Cases["b"].Digest() || c.GotDigest() == c.PinnedDigest() {
		t.Errorf("combined digests: pinned %s (file %s), got %s", c.PinnedDigest(), f.Cases["b"].Digest(), c.GotDigest())
	}
	if d := Compare(f, map[string][]string{"a": {digest("a")}, "b": {digest("b")}, "gone": {digest("g")},
		"two": {digest("t0"), digest("t1")}, "z": {digest("z")}}); !d.Empty() || d.Same != 5 {
		t.Errorf("identical digests: %+v, want empty with 5 same", d)
	}
}
