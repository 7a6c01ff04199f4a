package collective

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/differential/gloo"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

func TestRowsCoverTheTable(t *testing.T) {
	rows := Rows()
	seen := map[string]bool{}
	ops := map[string]bool{}
	for _, r := range rows {
		if seen[r.Name()] {
			t.Errorf("row %s repeated", r.Name())
		}
		seen[r.Name()] = true
		ops[r.Op] = true
		in := r.Inputs()
		if len(in) != r.World || bytes.Equal(in[0].Data, in[1].Data) {
			t.Errorf("%s: %d inputs, ranks 0 and 1 equal %v", r.Name(), len(in), len(in) > 1 && bytes.Equal(in[0].Data, in[1].Data))
		}
		if !slices.Equal(in[0].Shape, r.Shape()) || in[0].DType != r.DType {
			t.Errorf("%s: input %s", r.Name(), in[0].TypeString())
		}
		if again := r.Inputs(); !bytes.Equal(again[1].Data, in[1].Data) {
			t.Errorf("%s: inputs are not a function of the row", r.Name())
		}
	}
	for _, op := range gloo.Ops {
		if !ops[op] {
			t.Errorf("gloo op %s has no rows", op)
		}
	}
	// 3 data-only ops + 2 reducing ops x 4 reductions, x dtypes x worlds.
	if want := (3 + 2*len(gloo.Reds)) * len(DTypes) * len(Worlds); len(rows) != want {
		t.Errorf("%d rows, want %d", len(rows), want)
	}
	if r := (Row{Op: "all_reduce", Red: "sum", DType: numerics.F32, World: 2}); r.Tolerance().Bitwise || r.Tolerance() != harness.DefaultTolerance(numerics.F32).ForReduction(2) {
		t.Errorf("float sum tolerance %s", r.Tolerance())
	}
	for _, r := range []Row{{Op: "all_reduce", Red: "max", DType: numerics.F32, World: 4}, {Op: "all_reduce", Red: "sum", DType: numerics.I32, World: 4}, {Op: "all_gather", DType: numerics.BF16, World: 2}} {
		if !r.Tolerance().Bitwise {
			t.Errorf("%s: tolerance %s, want bitwise", r.Name(), r.Tolerance())
		}
	}
}

// TestEngineAgreesWithTheGoldenModel runs every row the graph accepts on the engine and on
// ref.RunDist (no torch needed): the engine side of the table is right before gloo is asked.
func TestEngineAgreesWithTheGoldenModel(t *testing.T) {
	for _, r := range Rows() {
		if _, err := r.Graph(); err != nil {
			if r.Red == "avg" && !r.DType.IsFloat() {
				continue // the registry refuses an integer avg; gloo's refusal is what the suite reports
			}
			t.Fatalf("%s: %v", r.Name(), err)
		}
		in := r.Inputs()
		got, err := Engine(context.Background(), r, in)
		if err != nil {
			t.Fatalf("%s: %v", r.Name(), err)
		}
		want, err := golden(r, in)
		if err != nil {
			t.Fatalf("%s: %v", r.Name(), err)
		}
		for k := range want {
			if c := harness.Check(got[k], want[k], r.Tolerance()); !c.Pass {
				t.Errorf("%s rank %d: %s", r.Name(), k, c.Reason)
			}
		}
	}
}

var probed struct {
	once sync.Once
	err  error
}

// needGloo skips without torch unless $TESSERA_QA_PYTHON asks for it (then it fails).
func needGloo(t *testing.T) {
	t.Helper()
	probed.once.Do(func() { _, probed.err = gloo.Probe(context.Background(), gloo.Config{}) })
	if errs.CodeOf(probed.err) == errs.NoDevice && os.Getenv(differential.PythonEnv) == "" {
		t.Skip(probed.err.Error())
	}
	if probed.err != nil {
		t.Fatal(probed.err)
	}
}

func TestCheckAgainstGloo(t *testing.T) {
	needGloo(t)
	ctx := context.Background()
	ok := Row{Op: "all_reduce", Red: "sum", DType: numerics.F32, World: 2}
	if r := Check(ctx, gloo.Config{}, ok); r.Verdict != harness.VerdictPass || len(r.Outputs) != 2 {
		t.Fatalf("%s: %s %s (%d outputs)", ok.Name(), r.Verdict, r.Reason, len(r.Outputs))
	}
	refused := Row{Op: "reduce_scatter", Red: "sum", DType: numerics.F32, World: 2}
	if r := Check(ctx, gloo.Config{}, refused); r.Verdict != harness.VerdictSkip || r.ErrorCode != string(errs.Unsupported) || !strings.Contains(r.Reason, "gloo") {
		t.Errorf("%s: %s %s %s, want a skip with gloo's E_UNSUPPORTED reason", refused.Name(), r.Verdict, r.ErrorCode, r.Reason)
	}

	// A planted engine bug (one bit of rank 1's output) fails, naming the rank and saying the
	// golden model agrees with gloo.
	defer func() { engineRun = Engine }()
	engineRun = func(ctx context.Context, r Row, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		outs, err := Engine(ctx, r, in)
		if err == nil {
			outs[1].Data[4] ^= 0x10
		}
		return outs, err
	}
	bug := Row{Op: "broadcast", DType: numerics.I32, World: 2}
	r := Check(ctx, gloo.Config{}, bug)
	if r.Verdict != harness.VerdictFail || !strings.Contains(r.Reason, "rank 1: engine vs gloo") || !strings.Contains(r.Reason, "the golden model agrees with gloo") {
		t.Errorf("planted bug: %s %s", r.Verdict, r.Reason)
	}
}

func TestTableChecksEveryRowOnce(t *testing.T) {
	rows := Rows()[:6]
	var mu sync.Mutex
	calls := map[string]int{}
	tab := NewTable(gloo.Config{}, rows)
	tab.checkAll = func(_ context.Context, _ gloo.Config, rs []Row) []harness.Result {
		mu.Lock()
		defer mu.Unlock()
		var out []harness.Result
		for _, r := range rs {
			calls[r.Name()]++
			out = append(out, harness.Result{Case: r.Name(), Verdict: harness.VerdictPass})
		}
		return out
	}
	if res := tab.Result(rows[2]); res.Case != rows[2].Name() {
		t.Fatalf("got %s for %s", res.Case, rows[2].Name())
	}
	for _, r := range rows {
		if res := tab.Result(r); res.Case != r.Name() {
			t.Fatalf("got %s for %s", res.Case, r.Name())
		}
	}
	tab.Result(rows[5])
	mu.Lock()
	defer mu.Unlock()
	for _, r := range rows {
		if calls[r.Name()] != 1 {
			t.Errorf("%s checked %d times", r.Name(), calls[r.Name()])
		}
	}
	if res := tab.Result(Row{Op: "no_such_op", DType: numerics.F32, World: 2}); res.Verdict != harness.VerdictError {
		t.Errorf("a row outside the table: %s", res.Verdict)
	}
}
