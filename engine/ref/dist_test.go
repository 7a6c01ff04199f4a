package ref

import (
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// distRun parses src and runs it with per-rank input x built by mk(rank).
func distRun(t *testing.T, src string, mk func(r int) map[string]*tensor.Tensor) [][]*tensor.Tensor {
	t.Helper()
	g, err := graph.Parse(src, "d.tg")
	if err != nil {
		t.Fatal(err)
	}
	ins := make([]map[string]*tensor.Tensor, g.Mesh.World())
	for r := range ins {
		ins[r] = mk(r)
	}
	outs, err := RunDist(g, ins)
	if err != nil {
		t.Fatal(err)
	}
	return outs
}

func vals(t *tensor.Tensor) []float64 { return t.Float64s() }

func TestAReplicatedOneAllReducedOverFourRanksIsFour(t *testing.T) {
	outs := distRun(t, "graph s {\n mesh dp=4\n input %x: f32[1]\n %y = all_reduce(%x) {axis=\"dp\"}\n output %y\n}\n",
		func(int) map[string]*tensor.Tensor { return map[string]*tensor.Tensor{"x": tt(f32, sh(1), 1)} })
	for r, o := range outs {
		if got := vals(o[0]); !slices.Equal(got, []float64{4}) {
			t.Fatalf("rank %d: %v, want [4]", r, got)
		}
	}
}

func TestReductionsRunOverTheGroupAlongTheAxisOnly(t *testing.T) {
	// rank r holds [r]; tp groups are {0,1} and {2,3}.
	src := "graph s {\n mesh dp=2,tp=2\n input %x: f32[1]\n %a = all_reduce(%x) {axis=\"tp\", op=\"OP\"}\n output %a\n}\n"
	for op, want := range map[string][]float64{"sum": {1, 1, 5, 5}, "max": {1, 1, 3, 3}, "min": {0, 0, 2, 2}, "avg": {0.5, 0.5, 2.5, 2.5}} {
		outs := distRun(t, strings.Replace(src, "OP", op, 1), func(r int) map[string]*tensor.Tensor {
			return map[string]*tensor.Tensor{"x": tt(f32, sh(1), float64(r))}
		})
		for r := range outs {
			if got := vals(outs[r][0])[0]; got != want[r] {
				t.Errorf("%s: rank %d got %v, want %v", op, r, got, want[r])
			}
		}
	}
}

func TestIntegerSumsWrapOnceAtTheDtypeWidth(t *testing.T) {
	outs := distRun(t, "graph s {\n mesh dp=3\n input %x: int8[1]\n %a = all_reduce(%x) {axis=\"dp\"}\n output %a\n}\n",
		func(int) map[string]*tensor.Tensor {
			return map[string]*tensor.Tensor{"x": tt(numerics.I8, sh(1), 100)}
		})
	if got := vals(outs[0][0])[0]; got != 300-256 {
		t.Fatalf("3 x 100 in int8 = %v, want 44", got)
	}
}

func TestGatherScatterAndAllToAllMoveBlocksInCoordinateOrder(t *testing.T) {
	// Rank r holds a 2x4 matrix whose entries are 100*r + index.
	src := `graph m {
  mesh tp=2
  input %x: f32[2,4]
  %g = all_gather(%x) {axis="tp", dim=1}
  %s = reduce_scatter(%x) {axis="tp", dim=1}
  %a = all_to_all(%x) {axis="tp", split_dim=1, concat_dim=0}
  %c = chunk(%x) {axis="tp", dim=0}
  %b = broadcast(%x) {axis="tp", root=1}
  output %g, %s, %a, %c, %b
}
`
	outs := distRun(t, src, func(r int) map[string]*tensor.Tensor {
		v := make([]float64, 8)
		for i := range v {
			v[i] = float64(100*r + i)
		}
		return map[string]*tensor.Tensor{"x": tt(f32, sh(2, 4), v...)}
	})
	want := map[string][2][]float64{
		"g": {{0, 1, 2, 3, 100, 101, 102, 103, 4, 5, 6, 7, 104, 105, 106, 107}, {0, 1, 2, 3, 100, 101, 102, 103, 4, 5, 6, 7, 104, 105, 106, 107}},
		"s": {{100, 102, 108, 110}, {104, 106, 112, 114}},
		"a": {{0, 1, 4, 5, 100, 101, 104, 105}, {2, 3, 6, 7, 102, 103, 106, 107}},
		"c": {{0, 1, 2, 3}, {104, 105, 106, 107}},
		"b": {{100, 101, 102, 103, 104, 105, 106, 107}, {100, 101, 102, 103, 104, 105, 106, 107}},
	}
	for i, name := range []string{"g", "s", "a", "c", "b"} {
		for r := range 2 {
			if got := vals(outs[r][i]); !slices.Equal(got, want[name][r]) {
				t.Errorf("%%%s on rank %d: %v, want %v", name, r, got, want[name][r])
			}
		}
	}
	if !slices.Equal(outs[0][0].Shape, []int{2, 8}) || !slices.Equal(outs[0][2].Shape, []int{4, 2}) {
		t.Fatalf("shapes %v %v", outs[0][0].Shape, outs[0][2].Shape)
	}
}

func TestRecvGetsWhatTheMatchingSendHeldAndOtherStagesGetZeros(t *testing.T) {
	src := `graph pipe {
  mesh pp=3
  input %x: f32[2]
  %h = mul(%x, %x)
  %s = send(%h) {axis="pp", src=0, dst=1}
  %r: f32[2] = recv() {axis="pp", src=0, dst=1, dtype=f32, shape=[2]}
  output %r, %s
}
`
	outs := distRun(t, src, func(r int) map[string]*tensor.Tensor {
		return map[string]*tensor.Tensor{"x": tt(f32, sh(2), float64(r+2), 1)}
	})
	for r, want := range [][]float64{{0, 0}, {4, 1}, {0, 0}} {
		if got := vals(outs[r][0]); !slices.Equal(got, want) {
			t.Errorf("rank %d received %v, want %v", r, got, want)
		}
	}
	if got := vals(outs[1][1]); !slices.Equal(got, []float64{9, 1}) {
		t.Errorf("send passes its input through: %v", got)
	}
}

func TestRunDistChecksRankCountAndUnmatchedRecv(t *testing.T) {
	g, err := graph.Parse("graph s {\n mesh dp=2\n input %x: f32[1]\n %r: f32[1] = recv() {axis=\"dp\", src=0, dst=1, dtype=f32, shape=[1]}\n output %r\n}\n", "d.tg")
	if err != nil {
		t.Fatal(err)
	}
	one := map[string]*tensor.Tensor{"x": tt(f32, sh(1), 1)}
	if _, err := RunDist(g, []map[string]*tensor.Tensor{one}); errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), "2 ranks") {
		t.Fatalf("rank count: %v", err)
	}
	if _, err := RunDist(g, []map[string]*tensor.Tensor{one, one}); errs.CodeOf(err) != errs.Input || !strings.Contains(err.Error(), "no send") {
		t.Fatalf("unmatched recv: %v", err)
	}
	if _, err := Run(g, one); errs.CodeOf(err) != errs.Unsupported {
		t.Fatalf("Run on a collective: %v", err)
	}
}
