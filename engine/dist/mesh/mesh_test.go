package mesh

import (
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func mustMesh(t *testing.T, s string) *Mesh {
	t.Helper()
	m, err := ParseMesh(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestParseMeshReadsAxesInOrderWithCPUDevices(t *testing.T) {
	m := mustMesh(t, " dp = 4 , tp=2 ")
	if want := []Axis{{"dp", 4}, {"tp", 2}}; !slices.Equal(m.Axes, want) {
		t.Fatalf("axes %v, want %v", m.Axes, want)
	}
	if m.World() != 8 || m.String() != "dp=4,tp=2" {
		t.Fatalf("world %d, string %q", m.World(), m.String())
	}
	if m.Devices[0] != "cpu:0" || m.Devices[7] != "cpu:7" {
		t.Fatalf("devices %v", m.Devices)
	}
}

func TestParseMeshRejectsMalformedStringsWithOneCodedLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		code errs.Code
		want string
	}{
		{"", errs.Parse, "empty"},
		{"dp", errs.Parse, "not axis=size"},
		{"dp=", errs.Parse, "not axis=size"},
		{"dp=0", errs.Parse, "want an integer"},
		{"dp=-2", errs.Parse, "want an integer"},
		{"dp=+2", errs.Parse, "want an integer"},
		{"dp=2x", errs.Parse, "want an integer"},
		{"1dp=2", errs.Parse, "not an identifier"},
		{"d.p=2", errs.Parse, "not an identifier"},
		{"dp=2,dp=2", errs.Input, "named twice"},
		{"a=256,b=256,c=2", errs.Input, "more than 65536 ranks"},
		{"a=1,b=1,c=1,d=1,e=1,f=1,g=1,h=1,i=1", errs.Input, "limit 8"},
		{"dp=2,,tp=2", errs.Parse, "item 2"},
	} {
		_, err := ParseMesh(c.in)
		if errs.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseMesh(%q) = %v, want %s containing %q", c.in, err, c.code, c.want)
		}
	}
}

func TestRanksAndCoordinatesAreRowMajorInverses(t *testing.T) {
	m := mustMesh(t, "pp=2,dp=3,tp=2")
	for r := range m.World() {
		if got := m.Rank(m.Coords(r)); got != r {
			t.Fatalf("Rank(Coords(%d)) = %d", r, got)
		}
	}
	if c := m.Coords(7); !slices.Equal(c, []int{1, 0, 1}) {
		t.Fatalf("Coords(7) = %v, want [1 0 1] (last axis fastest)", c)
	}
	if m.CoordString(7) != "pp=1,dp=0,tp=1" || m.Coord("dp", 9) != 1 {
		t.Fatalf("CoordString(7) = %s, Coord(dp, 9) = %d", m.CoordString(7), m.Coord("dp", 9))
	}
}

func TestGroupsShareAllOtherCoordinatesAndAreOrderedAlongTheAxis(t *testing.T) {
	m := mustMesh(t, "dp=4,tp=2")
	if g := m.Group("tp", 5); !slices.Equal(g, []int{4, 5}) {
		t.Fatalf("tp group of 5 = %v", g)
	}
	if g := m.Group("dp", 5); !slices.Equal(g, []int{1, 3, 5, 7}) {
		t.Fatalf("dp group of 5 = %v", g)
	}
	if m.Group("pp", 0) != nil {
		t.Fatal("unknown axis has a group")
	}
}

func TestGroupIDsAgreeWithinAGroupAndDifferAcrossGroups(t *testing.T) {
	m := mustMesh(t, "a=2,b=3,c=2")
	owner := map[uint32]string{}
	for _, ax := range m.Axes {
		for r := range m.World() {
			id := m.GroupID(ax.Name, r)
			if id < GroupIDBase {
				t.Fatalf("id %d below base", id)
			}
			key := sprintf("%s:%v", ax.Name, m.Group(ax.Name, r))
			if prev, ok := owner[id]; ok && prev != key {
				t.Fatalf("id %d used by %s and %s", id, prev, key)
			}
			owner[id] = key
		}
	}
	if len(owner) != 6+4+6 { // a: 6 groups of 2, b: 4 groups of 3, c: 6 groups of 2
		t.Fatalf("%d distinct ids, want one per group (16)", len(owner))
	}
}

func TestDevicesAreValidatedOnePerRank(t *testing.T) {
	m := mustMesh(t, "dp=2")
	if _, err := m.WithDevices([]string{"cuda:0", "cuda:0/sm:64-127"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.WithDevices([]string{"MIG-4f2b1c9e-1a2b-5c3d-9e8f-001122334455", "cpu:1"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{{"cuda:0"}, {"gpu:0", "cpu:1"}, {"cuda:0/sm:9-3", "cpu:1"}, {"cuda:01", "cpu:1"}} {
		if _, err := m.WithDevices(bad); errs.CodeOf(err) != errs.Input {
			t.Errorf("devices %v: %v, want E_INPUT", bad, err)
		}
	}
}
