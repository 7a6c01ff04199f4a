package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/gradients"
)

func TestGradcheckUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"gradcheck", "--vs", "tensorflow"},
		{"gradcheck", "--ops", "exp,no_such_op"},
		{"gradcheck", "--timeout", "0s"},
		{"gradcheck", "extra"},
	} {
		cli(t, args...).want(t, ExitUsage, "E_INPUT")
	}
}

func TestGradcheckOps(t *testing.T) {
	// Without --vs no oracle is started, whatever the environment holds.
	t.Setenv(differential.PythonEnv, filepath.Join(t.TempDir(), "no-python"))
	o := cli(t, "gradcheck", "--ops", "exp,chunk", "--json", "-")
	o.want(t, ExitOK, "")
	var rep gradcheckJSON
	mustJSON(t, o.stdout, &rep)
	if !rep.Passed || rep.Vs != nil || len(rep.Rows) != 7 { // exp: 6 float dtypes; chunk: no gradient
		t.Fatalf("report: %+v", rep)
	}
	for _, r := range rep.Rows {
		if r.Vs != "" {
			t.Errorf("row %s/%s has an oracle verdict %q without --vs", r.Op, r.DType, r.Vs)
		}
		if r.Op == "chunk" && (r.Verdict != gradients.NoGrad || r.Reason == "") {
			t.Errorf("chunk: %+v", r)
		}
	}
}

// --vs names an oracle explicitly: one that cannot start is exit 3, E_NO_DEVICE.
func TestGradcheckVsMissingOracleIsExit3(t *testing.T) {
	o := cli(t, "gradcheck", "--ops", "exp", "--vs", "torch", "--python", filepath.Join(t.TempDir(), "no-python"))
	o.want(t, ExitMissing, "E_NO_DEVICE")

	noTorch := fakePython(t, `echo '{"type":"hello","protocol":2,"framework":"torch","python":"3.9","error":"ModuleNotFoundError: No module named torch"}'`)
	t.Setenv(differential.PythonEnv, noTorch)
	o = cli(t, "gradcheck", "--ops", "exp", "--vs", "torch")
	o.want(t, ExitMissing, "E_NO_DEVICE")
	if !strings.Contains(o.stderr, "No module named torch") {
		t.Errorf("the reason is missing: %s", o.stderr)
	}
}

func TestGradcheckOracleDevice(t *testing.T) {
	if oracleDevice("cuda") != "cuda" || oracleDevice("cpu") != "cpu" {
		t.Error("the oracle must compute on the GPU for --backend cuda, on the CPU otherwise")
	}
}

// Against torch (skipped when no interpreter has torch and none was named): every row of the
// selected ops agrees, collectives say they have no comparison.
func TestGradcheckVsTorch(t *testing.T) {
	o := cli(t, "gradcheck", "--ops", "softmax,full_like,matmul,all_gather", "--vs", "torch", "--json", "-")
	if o.code == ExitMissing && os.Getenv(differential.PythonEnv) == "" {
		t.Skip(o.stderr)
	}
	o.want(t, ExitOK, "")
	var rep gradcheckJSON
	mustJSON(t, o.stdout, &rep)
	if !rep.Passed || rep.Vs == nil || rep.Vs.Framework != "torch" || rep.Vs.Device != "cpu" {
		t.Fatalf("report: passed %v, vs %+v", rep.Passed, rep.Vs)
	}
	for _, r := range rep.Rows {
		switch {
		case r.Verdict == gradients.NoGrad:
		case r.Op == "all_gather":
			if r.Vs != gradients.OracleNA || !strings.Contains(r.VsReason, "mesh") {
				t.Errorf("all_gather/%s: %q %q", r.DType, r.Vs, r.VsReason)
			}
		case r.Vs != gradients.OraclePass || r.VsCompared == 0:
			t.Errorf("%s/%s: vs torch %q (%d compared): %s", r.Op, r.DType, r.Vs, r.VsCompared, r.VsReason)
		}
	}
	if !strings.Contains(o.stderr, "TORCH-WORST") {
		t.Errorf("the table has no torch column:\n%s", o.stderr)
	}
}
