package graph

import (
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

const collectiveExample = `graph tp {
  mesh dp=2, tp=4
  input %x: f32[8,8]
  %a: f32[8,8] = all_reduce(%x) {axis="tp", op="avg"}
  %g: f32[8,16] = all_gather(%a) {axis="dp", dim=1}
  %s: f32[2,16] = reduce_scatter(%g) {axis="tp", op="max"}
  %t: f32[8,4] = all_to_all(%s) {axis="tp", split_dim=1, concat_dim=0}
  %b: f32[8,4] = broadcast(%t) {axis="dp", root=1}
  %c: f32[8,1] = chunk(%b) {axis="tp", dim=-1}
  %o: f32[8,1] = send(%c) {axis="dp", src=0, dst=1}
  %r: f32[8,1] = recv() {axis="dp", src=0, dst=1, dtype=f32, shape=[8,1]}
  output %o, %r
}
`

func TestCollectiveShapesFollowTheAxisSizesOfTheGraphsMesh(t *testing.T) {
	g := mustParse(t, collectiveExample)
	if g.Mesh.String() != "dp=2,tp=4" {
		t.Fatalf("mesh %v", g.Mesh)
	}
	text := Print(g)
	if !strings.HasPrefix(text, "graph tp {\n  mesh dp=2,tp=4\n  input %x") {
		t.Fatalf("the mesh line is not printed first:\n%s", text)
	}
	roundTrip(t, g)
}

func TestCollectiveOpsAreListedApartFromSingleDeviceOps(t *testing.T) {
	var names []string
	for _, d := range CollectiveOps() {
		names = append(names, d.Name)
	}
	if got := strings.Join(names, ","); got != "all_gather,all_reduce,all_to_all,broadcast,chunk,recv,reduce_scatter,send" {
		t.Fatalf("collective ops %s", got)
	}
	for _, d := range Ops() {
		if d.Kind == KindCollective {
			t.Fatalf("Ops lists collective %s", d.Name)
		}
	}
	if !IsCollective("all_reduce") || IsCollective("matmul") {
		t.Fatal("IsCollective")
	}
}

func TestCollectiveErrorsAreCodedAndNameTheNode(t *testing.T) {
	head := "graph g {\n  mesh dp=2,tp=4\n  input %x: f32[6,8]\n  input %i: int32[4]\n"
	for _, c := range []struct {
		src  string
		code errs.Code
		want string
	}{
		{"graph g {\n  input %x: f32[4]\n  %a = all_reduce(%x) {axis=\"tp\"}\n  output %a\n}\n", errs.Input, "needs the graph's mesh"},
		{head + "  %a = all_reduce(%x) {axis=\"pp\"}\n  output %a\n}\n", errs.Shape, `no axis "pp"`},
		{head + "  %a = all_reduce(%x) {axis=\"tp\", op=\"prod\"}\n  output %a\n}\n", errs.Input, `op="prod" is not allowed; allowed: "sum", "max", "min", "avg"`},
		{head + "  %a = all_reduce(%i) {axis=\"tp\", op=\"avg\"}\n  output %a\n}\n", errs.Shape, "avg needs float"},
		{head + "  %a = reduce_scatter(%x) {axis=\"tp\"}\n  output %a\n}\n", errs.Shape, "dim 0 (size 6) is not divisible by mesh axis tp (size 4)"},
		{head + "  %a = chunk(%x) {axis=\"tp\", dim=2}\n  output %a\n}\n", errs.Shape, "dim 2"},
		{head + "  %a = broadcast(%x) {axis=\"dp\", root=2}\n  output %a\n}\n", errs.Shape, "root 2 outside axis dp of size 2"},
		{head + "  %a = send(%x) {axis=\"dp\", src=1, dst=1}\n  output %a\n}\n", errs.Shape, "does not send to itself"},
		{head + "  %a = recv() {axis=\"dp\", src=0, dst=1, dtype=f32, shape=[-1]}\n  output %a\n}\n", errs.Shape, "dims must be >= 0"},
		{head + "  %a = all_to_all(%x) {axis=\"tp\", split_dim=0}\n  output %a\n}\n", errs.Shape, "not divisible"},
		{"graph g {\n  input %x: f32[4]\n  mesh dp=2\n  output %x\n}\n", errs.Parse, "mesh line comes once, first"},
		{"graph g {\n  mesh dp=2\n  mesh tp=2\n  input %x: f32[4]\n  output %x\n}\n", errs.Parse, "mesh line comes once"},
		{"graph g {\n  mesh dp=2,dp=2\n  input %x: f32[4]\n  output %x\n}\n", errs.Input, "named twice"},
		{"graph g {\n  mesh dp=0\n  input %x: f32[4]\n  output %x\n}\n", errs.Parse, "want an integer"},
		{"graph g {\n  mesh dp 2\n  input %x: f32[4]\n  output %x\n}\n", errs.Parse, "expected '='"},
	} {
		_, err := Parse(c.src, "c.tg")
		if errs.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "c.tg:") {
			t.Errorf("got %v\nwant %s containing %q for\n%s", err, c.code, c.want, c.src)
		}
	}
}

func TestBuilderInfersCollectivesOverItsMesh(t *testing.T) {
	m, err := mesh.ParseMesh("dp=4")
	if err != nil {
		t.Fatal(err)
	}
	b := NewBuilder("dp")
	b.Mesh(m)
	x := b.Input("x", f32, 1)
	b.Output(b.Op("all_gather", Attrs{"axis": String("dp")}, b.Op("all_reduce", Attrs{"axis": String("dp")}, x)))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Outputs[0].Type.String(); got != "f32[4]" {
		t.Fatalf("all_gather of f32[1] over dp=4 is %s", got)
	}
	if c := g.Clone(); !Equal(c, g) || c.Mesh != g.Mesh {
		t.Fatal("Clone loses the mesh")
	}
	other := g.Clone()
	other.Mesh, _ = mesh.ParseMesh("dp=2")
	if d := Diff(g, other); !strings.Contains(d, "mesh") {
		t.Fatalf("Diff ignores the mesh: %q", d)
	}
}
