package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// emptyGraphs use every op kind with a dim of size 0: empty outputs, and non-empty outputs
// computed from empty operands (a sum over an empty axis, K = 0, no keys).
var emptyGraphs = []string{
	"input %x: f32[3,0]\n%y = relu(%x)\noutput %y",
	"input %x: f32[3,0]\ninput %z: f32[1,0]\n%y = add(%x, %z)\noutput %y",
	"input %x: f32[0,4]\ninput %z: f32[4]\n%y = mul(%x, %z)\noutput %y",
	"input %x: f32[3,0]\n%y = cast(%x) {to=bf16}\noutput %y",
	"input %x: f32[3,0]\n%y = reduce_sum(%x) {axes=[1]}\noutput %y",
	"input %x: f32[3,0]\n%y = reduce_sum(%x) {axes=[0]}\noutput %y",
	"input %x: f32[3,0]\n%y = reduce_sum(%x)\noutput %y",
	"input %x: int32[3,0]\n%y = reduce_sum(%x) {axes=[1]}\noutput %y",
	"input %x: f32[3,0]\n%y = reduce_mean(%x) {axes=[1], keepdims=true}\noutput %y",
	"input %x: f32[3,0]\n%y = reduce_mean(%x)\noutput %y",
	"input %x: f32[3,0]\n%y = reduce_max(%x) {axes=[0]}\noutput %y",
	"input %x: f32[3,0]\n%y = softmax(%x)\noutput %y",
	"input %x: f32[0,5]\n%y = softmax(%x)\noutput %y",
	"input %x: f32[3,0]\n%y = log_softmax(%x) {axis=0}\noutput %y",
	"input %x: f32[0,4]\ninput %g: f32[4]\ninput %b: f32[4]\n%y = layernorm(%x, %g, %b)\noutput %y",
	"input %x: f32[3,0]\ninput %g: f32[0]\ninput %b: f32[0]\n%y = layernorm(%x, %g, %b)\noutput %y",
	"input %x: f32[3,0]\ninput %g: f32[0]\n%y = rmsnorm(%x, %g)\noutput %y",
	"input %a: f32[2,0]\ninput %b: f32[0,3]\n%y = matmul(%a, %b)\noutput %y",
	"input %a: f32[0,4]\ninput %b: f32[4,3]\n%y = matmul(%a, %b)\noutput %y",
	"input %a: f32[2,4]\ninput %b: f32[4,0]\n%y = matmul(%a, %b)\noutput %y",
	"input %a: f32[0,2,4]\ninput %b: f32[0,4,3]\n%y = batch_matmul(%a, %b)\noutput %y",
	"input %a: f32[2,2,0]\ninput %b: f32[2,0,3]\n%y = batch_matmul(%a, %b)\noutput %y",
	"input %q: f32[1,2,4]\ninput %k: f32[1,0,4]\ninput %v: f32[1,0,3]\n%y = attention(%q, %k, %v)\noutput %y",
	"input %q: f32[1,0,4]\ninput %k: f32[1,5,4]\ninput %v: f32[1,5,3]\n%y = attention(%q, %k, %v)\noutput %y",
	"input %q: f32[0,2,4]\ninput %k: f32[0,5,4]\ninput %v: f32[0,5,3]\n%y = attention(%q, %k, %v) {causal=true}\noutput %y",
	"input %x: f32[3,0,2]\n%y = transpose(%x) {perm=[2,0,1]}\noutput %y",
	"input %x: f32[3,0,2]\n%y = reshape(%x) {shape=[0,6]}\noutput %y",
	"input %x: f32[3,0,2]\n%y = reshape(%x) {shape=[-1,2]}\noutput %y",
	"input %x: f32[4,3]\n%y = slice(%x) {starts=[2,0], ends=[2,3]}\noutput %y",
	"input %x: f32[0,3]\ninput %z: f32[2,3]\n%y = concat(%x, %z, %x) {axis=0}\noutput %y",
	"input %x: f32[2,0]\ninput %z: f32[2,3]\n%y = concat(%x, %z) {axis=1}\noutput %y",
	"input %x: f32[0,3]\ninput %z: f32[0,3]\n%y = mse_loss(%x, %z)\noutput %y",
	"input %x: f32[0,3]\n%y = full_like(%x) {value=2.0}\noutput %y",
	"input %x: f32[3,0]\n%e = exp(%x)\n%s = reduce_sum(%e) {axes=[1], keepdims=true}\n%y = div(%e, %s)\noutput %y, %s",
}

// emptyAnswers are torch 1.13's answers (/usr/bin/python3) for the graphs whose output is
// not empty although an operand is: the value over nothing, for every element.
var emptyAnswers = map[int]float64{
	4: 0, 6: 0, 7: 0, // sum over an empty axis, all axes, int32
	8: math.NaN(), 9: math.NaN(), // mean: 0/0
	17: 0, 21: 0, // matmul, bmm with K = 0
	22: 0,            // softmax(q k^T) v over 0 keys (torch 1.13 composition)
	31: math.NaN(),   // mse_loss over 0 elements
	34: math.Inf(-1), // logsumexp over 0 keys
	35: 0,            // _scaled_mm with K = 0 (scales 1)
}

// TestEmptyTensorsRunAsTheReferenceAndTorchSay runs each graph on the golden model and the CPU
// backend: shapes must be torch's, values bit-for-bit the model's, and where an output is
// the value over nothing, that value.
func TestEmptyTensorsRunAsTheReferenceAndTorchSay(t *testing.T) {
	for i, body := range emptyGraphs {
		txt := fmt.Sprintf("graph g%d {\n%s\n}\n", i, body)
		g, err := graph.Parse(txt, "x.tg")
		if err != nil {
			t.Errorf("%d parse: %v", i, err)
			continue
		}
		in := map[string]*tensor.Tensor{}
		rng := rand.New(rand.NewPCG(1, uint64(i)))
		for _, v := range g.Inputs {
			in[v.Name] = randTensor(rng, v.Type.DType, v.Type.Shape...)
		}
		if ts := in["sa"]; ts != nil {
			ts.SetFloat64(0, 1)
			in["sb"].SetFloat64(0, 1)
		}
		want, err := ref.Run(g, in)
		if err != nil {
			t.Errorf("%d ref: %v", i, err)
			continue
		}
		p, err := compiler.Compile(g, compiler.Options{})
		if err != nil {
			t.Errorf("%d compile: %v", i, err)
			continue
		}
		got, err := (&Backend{}).Run(p, in)
		if err != nil {
			t.Errorf("%d run: %v", i, err)
			continue
		}
		for j := range want {
			if !slices.Equal(got[j].Shape, g.Outputs[j].Type.Shape) || !slices.Equal(want[j].Shape, got[j].Shape) {
				t.Errorf("%d out %d: cpu %v, ref %v, graph %s", i, j, got[j].Shape, want[j].Shape, g.Outputs[j].Type)
				continue
			}
			wf, gf := want[j].Float64s(), got[j].Float64s()
			for e := range wf {
				if !same(wf[e], gf[e]) {
					t.Errorf("%d out %d elem %d: cpu %v, ref %v", i, j, e, gf[e], wf[e])
					break
				}
			}
			if v, ok := emptyAnswers[i]; ok && j == 0 {
				if len(gf) == 0 {
					t.Errorf("%d: output is empty, torch's is %s", i, g.Outputs[0].Type)
				}
				for e := range gf {
					if !same(gf[e], v) {
						t.Errorf("%d elem %d: got %v, torch gives %v", i, e, gf[e], v)
						break
					}
				}
			}
		}
	}
}

func same(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

func init() {
	emptyGraphs = append(emptyGraphs,
		"input %q: f32[1,2,4]\ninput %k: f32[1,0,4]\n%y = attention_lse(%q, %k)\noutput %y",
		"input %a: fp8e4m3[2,0]\ninput %b: fp8e4m3[3,0]\ninput %sa: f32[]\ninput %sb: f32[]\n%y = scaled_matmul(%a, %b, %sa, %sb)\noutput %y",
		"input %x: f32[0,3]\n%y = reduce_max(%x) {axes=[1]}\n%z = reduce_sum(%y)\noutput %y, %z",
	)
}

// The interpreter refuses a Tile IR kernel with a zero-size grid dim or a zero-length param
// (E_INTERNAL naming the kernel), as cuLaunchKernel refuses grid 0: the compiler never emits
// one (engine/compiler/lower_empty.go), so such a kernel is a compiler bug to report, not
// something to run as nothing.
func TestZeroGridKernelsAreCodedErrors(t *testing.T) {
	buf := tensor.New(numerics.F32, []int{4})
	body := []tile.Instr{tile.Full{Dst: 0, Rows: 1, Cols: 4, Value: 1}, tile.Store{Src: 0, At: row(0, 4)}}
	err := runTile(kernel([]int{0}, params([]*tensor.Tensor{buf}, 0), 1, 1, body...), 2, buf)
	if errs.CodeOf(err) != errs.Internal || !strings.Contains(err.Error(), "grid dim 0 is 0") || !strings.Contains(err.Error(), "kernel kt") {
		t.Errorf("grid [0]: %v", err)
	}
	empty := tensor.New(numerics.F32, []int{0})
	err = runTile(kernel([]int{1}, params([]*tensor.Tensor{empty}, 0), 1, 1, body...), 2, empty)
	if errs.CodeOf(err) != errs.Internal || !strings.Contains(err.Error(), "length 0") {
		t.Errorf("param of length 0: %v", err)
	}
}

// A program with no kernel at all (every output empty) runs: it checks its inputs, an empty
// tensor of the wrong shape included, and returns empty outputs of the graph's types.
func TestAProgramOfEmptyOutputsRunsNoKernelAndChecksItsInputs(t *testing.T) {
	g, err := graph.Parse("graph e {\n  input %x: f32[0,4]\n  %y = exp(%x)\n  %z = transpose(%y) {perm=[1,0]}\n  output %z\n}\n", "e.tg")
	if err != nil {
		t.Fatal(err)
	}
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil || len(p.Kernels) != 0 {
		t.Fatalf("%v, %d kernels", err, len(p.Kernels))
	}
	out, err := (&Backend{}).Run(p, map[string]*tensor.Tensor{"x": tensor.New(numerics.F32, []int{0, 4})})
	if err != nil || !slices.Equal(out[0].Shape, []int{4, 0}) || len(out[0].Data) != 0 {
		t.Fatalf("got %v, %v", out, err)
	}
	_, err = (&Backend{}).Run(p, map[string]*tensor.Tensor{"x": tensor.New(numerics.F32, []int{4, 0})})
	if errs.CodeOf(err) != errs.Input && errs.CodeOf(err) != errs.Shape {
		t.Fatalf("an f32[4,0] input for f32[0,4]: %v", err)
	}
}
