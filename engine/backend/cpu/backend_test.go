package cpu

import (
	"golang.org/x/sys/cpu"

	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

func TestRegisteredAsCPU(t *testing.T) {
	b, err := backend.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	if b.Name() != "cpu" || b.Available() != nil {
		t.Errorf("Name %q Available %v", b.Name(), b.Available())
	}
	if c := b.DeviceClass(); !strings.HasPrefix(c, "cpu/"+runtime.GOARCH) {
		t.Errorf("DeviceClass %q, want prefix cpu/%s", c, runtime.GOARCH)
	}
	// math.Exp's result depends on its FMA path, so the class must say which one runs here.
	if runtime.GOARCH == "amd64" && strings.Contains(b.DeviceClass(), "+fma") != (cpu.X86.HasAVX && cpu.X86.HasFMA) {
		t.Errorf("DeviceClass %q does not match this CPU's FMA support", b.DeviceClass())
	}
	if d := b.Device(); !strings.HasPrefix(d, "cpu "+runtime.GOOS+"/"+runtime.GOARCH+" x") || !strings.Contains(d, "GOMAXPROCS") {
		t.Errorf("Device %q", d)
	}
}

func compile(t *testing.T, name string, f func(b *graph.Builder)) (*graph.Graph, *compiler.Program) {
	t.Helper()
	g := buildGraph(t, name, f)
	p, err := compiler.Compile(g, compiler.Options{})
	if err != nil {
		t.Fatalf("compile %s: %v", name, err)
	}
	return g, p
}

// An output that is an input, and one value output twice, come back as independent copies.
func TestRunReturnsIndependentCopies(t *testing.T) {
	var x *graph.Value
	g, p := compile(t, "copies", func(b *graph.Builder) {
		x = b.Input("x", numerics.F32, 3)
		r := b.Op("relu", nil, x)
		b.Output(x, r, r)
	})
	_ = g
	in := tt(numerics.F32, []int{3}, -1, 2, -3)
	outs, err := (&Backend{}).Run(p, map[string]*tensor.Tensor{"x": in})
	if err != nil {
		t.Fatal(err)
	}
	wantValues(t, "x", outs[0], -1, 2, -3)
	wantValues(t, "relu", outs[1], 0, 2, 0)
	outs[1].SetFloat64(0, 99)
	outs[0].SetFloat64(0, 99)
	wantValues(t, "second relu", outs[2], 0, 2, 0)
	wantValues(t, "input after run", in, -1, 2, -3)
}

func TestRunChecksInputs(t *testing.T) {
	_, p := compile(t, "inputs", func(b *graph.Builder) {
		b.Output(b.Op("neg", nil, b.Input("x", numerics.F32, 2, 2)))
	})
	be := &Backend{}
	cases := []struct {
		feed map[string]*tensor.Tensor
		code errs.Code
	}{
		{map[string]*tensor.Tensor{}, errs.Input},
		{map[string]*tensor.Tensor{"x": tensor.New(numerics.F64, []int{2, 2})}, errs.DType},
		{map[string]*tensor.Tensor{"x": tensor.New(numerics.F32, []int{4})}, errs.Shape},
		{map[string]*tensor.Tensor{"x": tensor.New(numerics.F32, []int{2, 2}), "y": tensor.New(numerics.F32, []int{1})}, errs.Input},
	}
	for i, c := range cases {
		if _, err := be.Run(p, c.feed); errs.CodeOf(err) != c.code {
			t.Errorf("case %d: error %v, want code %s", i, err, c.code)
		}
	}
	if _, err := be.Run(nil, nil); errs.CodeOf(err) != errs.Input {
		t.Errorf("nil program: %v", err)
	}
}

// bigProgram has kernels with many grid points of every kind the compiler emits.
func bigProgram(t *testing.T) (*graph.Graph, *compiler.Program) {
	return compile(t, "big", func(b *graph.Builder) {
		a, w := b.Input("a", numerics.F32, 520, 96), b.Input("w", numerics.F32, 96, 260)
		h := b.Op("gelu", nil, b.Op("matmul", nil, a, w))
		s := b.Op("softmax", nil, h)
		q, k, v := b.Input("q", numerics.BF16, 4, 150, 32), b.Input("k", numerics.BF16, 4, 150, 32), b.Input("v", numerics.BF16, 4, 150, 32)
		att := b.Op("attention", graph.Attrs{"causal": graph.Bool(true)}, q, k, v)
		b.Output(s, att, b.Op("reduce_sum", graph.Attrs{"axes": graph.Ints(0)}, h))
	})
}

// The same program and inputs give the same bytes whatever the number of workers.
func TestDeterministicAcrossGOMAXPROCS(t *testing.T) {
	g, p := bigProgram(t)
	feed := randInputs(g, 42)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var first []string
	for _, procs := range []int{1, 2, 8} {
		runtime.GOMAXPROCS(procs)
		for _, be := range []*Backend{{}, {Workers: 3}} {
			outs, err := be.Run(p, feed)
			if err != nil {
				t.Fatal(err)
			}
			var ds []string
			for _, o := range outs {
				ds = append(ds, o.Digest())
			}
			if first == nil {
				first = ds
				continue
			}
			if fmt.Sprint(ds) != fmt.Sprint(first) {
				t.Errorf("GOMAXPROCS %d workers %d: digests %v, first run %v", procs, be.Workers, ds, first)
			}
		}
	}
}

// Concurrent runs of one program share nothing mutable.
func TestConcurrentRuns(t *testing.T) {
	g, p := bigProgram(t)
	feed := randInputs(g, 7)
	want, err := (&Backend{}).Run(p, feed)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := (&Backend{}).Run(p, feed)
			if err != nil {
				errc <- err
				return
			}
			for i := range got {
				if got[i].Digest() != want[i].Digest() {
					errc <- fmt.Errorf("output %d differs under concurrency", i)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}
