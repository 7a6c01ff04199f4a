package optim

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/backend/backendtest"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

//go:embed testdata/torch_optim.py
var torchScript []byte

// pythonEnv is differential.PythonEnv (not imported: engine tests stay off the harness):
// naming an interpreter there means torch was asked for, so its absence fails the test.
const pythonEnv = "TESSERA_QA_PYTHON"

// torchPython returns an interpreter that imports torch and numpy: $TESSERA_QA_PYTHON alone
// when set, else python3 on PATH, then /usr/bin/python3 (Debian's python3-torch installs
// there, while PATH often starts with another python), as the differential oracles look.
// None: skip with each candidate's reason, or fail when the interpreter was named.
func torchPython(t *testing.T) string {
	t.Helper()
	explicit := os.Getenv(pythonEnv)
	tries := []string{explicit}
	if explicit == "" {
		tries = pythonCandidates()
	}
	py, err := findTorch(tries)
	switch {
	case err != nil && explicit != "":
		t.Fatal(err)
	case err != nil:
		t.Skip(err)
	}
	return py
}

// pythonCandidates lists python3 on PATH and /usr/bin/python3, without duplicates.
func pythonCandidates() []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(p)
		if err != nil {
			continue
		}
		key := path
		if r, err := filepath.EvalSymlinks(path); err == nil {
			key = r
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, path)
		}
	}
	return out
}

// findTorch returns the first interpreter that imports torch and numpy, or an error saying
// why each failed and how to install torch.
func findTorch(tries []string) (string, error) {
	var why []string
	for _, py := range tries {
		out, err := exec.Command(py, "-c", "import torch, numpy").CombinedOutput()
		if err == nil {
			return py, nil
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		why = append(why, fmt.Sprintf("%s: %v: %s", py, err, lines[len(lines)-1]))
	}
	if len(tries) == 0 {
		why = append(why, "no python3 on PATH or at /usr/bin/python3")
	}
	return "", fmt.Errorf("torch unavailable (apt-get install -y --no-install-recommends python3-torch python3-numpy, or name an interpreter with $%s): %s", pythonEnv, strings.Join(why, "; "))
}

func TestFindTorchSaysWhy(t *testing.T) {
	if _, err := findTorch([]string{"/nonexistent/python3"}); err == nil || !strings.Contains(err.Error(), "/nonexistent/python3") {
		t.Errorf("a missing interpreter: %v", err)
	}
	if _, err := findTorch(nil); err == nil || !strings.Contains(err.Error(), "no python3") {
		t.Errorf("no interpreter: %v", err)
	}
}

// torchCase is one optimizer run, in the script's JSON.
type torchCase struct {
	Opt    string                      `json:"opt"`
	In     string                      `json:"in"`
	Out    string                      `json:"out"`
	Params []string                    `json:"params"`
	Steps  int                         `json:"steps"`
	Hyper  map[string]any              `json:"hyper"`
	LRs    []float64                   `json:"lrs"`
	opt    Optimizer                   // ours
	dt     numerics.DType              //
	ours   []map[string]*tensor.Tensor // after step k: "<param>__p" and "<param>__<buffer>"
}

// torchShapes cover a vector loop with a tail (37*29 = 1073 elements), a short vector and a
// 0-dim param.
var torchShapes = map[string][]int{"fc.w": {37, 29}, "fc.b": {29}, "scale": {}}

const torchSteps = 10

// torchGrad draws values over five decades, with about one in 16 exactly zero.
func torchGrad(rng *rand.Rand, dt numerics.DType, shape []int) *tensor.Tensor {
	v := make([]float64, tensor.NumElems(shape))
	for i := range v {
		if rng.IntN(16) != 0 {
			v[i] = rng.NormFloat64() * math.Pow(10, rng.Float64()*4-3)
		}
	}
	return tensor.FromFloat64(dt, shape, v)
}

func hyperOf(o Optimizer) (string, map[string]any, float64) {
	switch o := o.(type) {
	case SGD:
		return "sgd", map[string]any{"lr": o.LR, "momentum": o.Momentum, "dampening": o.Dampening, "weight_decay": o.WeightDecay, "nesterov": o.Nesterov}, o.LR
	case AdamW:
		return "adamw", map[string]any{"lr": o.LR, "beta1": o.Beta1, "beta2": o.Beta2, "eps": o.Eps, "weight_decay": o.WeightDecay}, o.LR
	}
	panic("unknown optimizer")
}

// withLR returns o with its learning rate set.
func withLR(o Optimizer, lr float64) Optimizer {
	switch o := o.(type) {
	case SGD:
		o.LR = lr
		return o
	case AdamW:
		o.LR = lr
		return o
	}
	panic("unknown optimizer")
}

// agreement accumulates the distance between our results and torch's for one optimizer kind,
// one dtype and one kind of tensor (param or state).
type agreement struct {
	maxULP       uint64
	maxAbs       float64
	maxRel       float64 // |a-e| / |e| over elements with e != 0
	maxNorm      float64 // max|a-e| / max|e| per tensor
	differ, elem int
}

func (a *agreement) add(ours, theirs *tensor.Tensor) {
	var dmax, emax float64
	defer func() {
		if emax > 0 {
			a.maxNorm = max(a.maxNorm, dmax/emax)
		}
	}()
	for i := range ours.Len() {
		x, e := ours.Float64(i), theirs.Float64(i)
		a.elem++
		if ours.Bits(i) != theirs.Bits(i) {
			a.differ++
		}
		a.maxULP = max(a.maxULP, numerics.ULPDistance(ours.DType, ours.Bits(i), theirs.Bits(i)))
		d := math.Abs(x - e)
		a.maxAbs = max(a.maxAbs, d)
		dmax, emax = max(dmax, d), max(emax, math.Abs(e))
		if e != 0 {
			a.maxRel = max(a.maxRel, d/math.Abs(e))
		}
	}
}

// withinBound is the documented agreement with torch, "" when met.
//
// f32: every op rounds as torch's does (the fma emulated in f64 can round twice, about once in
// 2^29 random operations), so the bits match; one ulp is allowed for that rare case. Observed:
// 0 ulp on every element of every step.
//
// f64: torch rounds a+alpha*b and addcmul once (FMA), we twice, and those last-bit differences
// carry over the steps. Where a buffer cancels (exp_avg = 0.9*m + 0.1*g near 0) a tiny value
// can be many ulp off, so the bound is normwise: max|ours-torch| <= 1e-14 * max|torch| over the
// tensor. Observed: below 2e-15 of the tensor's largest element (see the test's log).
func withinBound(ours, theirs *tensor.Tensor) string {
	if ours.DType == numerics.F32 {
		if u, abs := maxULP(ours, theirs); u > 1 {
			return fmt.Sprintf("%d ulp (abs %g) from torch, allowed 1", u, abs)
		}
		return ""
	}
	_, abs := maxULP(ours, theirs)
	scale := 0.0
	for i := range theirs.Len() {
		scale = max(scale, math.Abs(theirs.Float64(i)))
	}
	if abs > 1e-14*scale {
		return fmt.Sprintf("max abs difference %g is over 1e-14 of the largest element %g", abs, scale)
	}
	return ""
}

// Ten steps of every configuration against torch.optim, in f32 and f64, param by param and
// buffer by buffer after every step.
func TestAgainstTorchStepByStep(t *testing.T) {
	py := torchPython(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "torch_optim.py")
	if err := os.WriteFile(script, torchScript, 0o644); err != nil {
		t.Fatal(err)
	}
	b := backendtest.CPU(t)
	names := slices.Sorted(maps.Keys(torchShapes))
	var cases []*torchCase
	for ci, o := range configs {
		for _, dt := range []numerics.DType{numerics.F32, numerics.F64} {
			kind, hyper, lr := hyperOf(o)
			c := &torchCase{Opt: kind, Params: names, Steps: torchSteps, Hyper: hyper, opt: o, dt: dt,
				In: filepath.Join(dir, fmt.Sprintf("in%d%s.npz", ci, dt)), Out: filepath.Join(dir, fmt.Sprintf("out%d%s.npz", ci, dt))}
			rng := rand.New(rand.NewPCG(uint64(ci), 2024))
			params := map[string]*tensor.Tensor{}
			var arrNames []string
			var arrs []*tensor.Tensor
			for _, n := range names {
				params[n] = randn(rng, dt, torchShapes[n], 1, false)
				arrNames, arrs = append(arrNames, n+"__p0"), append(arrs, params[n].Clone())
			}
			st := NewState()
			for k := 1; k <= torchSteps; k++ {
				c.LRs = append(c.LRs, lr*(1-0.05*float64(k-1))) // a decaying schedule
				grads := map[string]*tensor.Tensor{}
				for _, n := range names {
					grads[n] = torchGrad(rng, dt, torchShapes[n])
					arrNames, arrs = append(arrNames, fmt.Sprintf("%s__g%d", n, k)), append(arrs, grads[n])
				}
				if err := withLR(o, c.LRs[k-1]).Step(b, params, grads, st); err != nil {
					t.Fatal(err)
				}
				snap := map[string]*tensor.Tensor{}
				for _, n := range names {
					snap[n+"__p"] = params[n].Clone()
				}
				for k, v := range st.Tensors() {
					snap[strings.Replace(k, "/", "__", 1)] = v
				}
				c.ours = append(c.ours, snap)
			}
			if err := tensor.WriteNPZFile(c.In, arrNames, arrs); err != nil {
				t.Fatal(err)
			}
			cases = append(cases, c)
		}
	}
	spec, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, "cases.json")
	if err := os.WriteFile(specPath, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, script, specPath).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", py, script, err, out)
	}
	t.Logf("%s: %s", py, strings.TrimSpace(string(out)))

	agree := map[string]*agreement{}
	for _, c := range cases {
		arrays, err := tensor.ReadNPZFile(c.Out)
		if err != nil {
			t.Fatal(err)
		}
		theirs := map[string]*tensor.Tensor{}
		for _, a := range arrays {
			tt, err := a.As(c.dt)
			if err != nil {
				t.Fatalf("%s: %v", a.Name, err)
			}
			theirs[a.Name] = tt
		}
		for k := 1; k <= torchSteps; k++ {
			ours := c.ours[k-1]
			for key, ot := range ours {
				// ours: "<param>__p", "<param>__<buffer>"; torch: the same with the step appended.
				tt := theirs[fmt.Sprintf("%s%d", key, k)]
				if tt == nil || !sameType(ot, tt) {
					t.Fatalf("%s %s step %d: torch has no %s %s (has %v)", name(c.opt), c.dt, k, key, ot.TypeString(), slices.Sorted(maps.Keys(theirs))[:6])
				}
				what := "param"
				if !strings.HasSuffix(key, "__p") {
					what = key[strings.Index(key, "__")+2:]
				}
				id := fmt.Sprintf("%s %s %s", c.Opt, c.dt, what)
				if agree[id] == nil {
					agree[id] = &agreement{}
				}
				agree[id].add(ot, tt)
				if err := withinBound(ot, tt); err != "" {
					t.Errorf("%s %s step %d %s: %s", name(c.opt), c.dt, k, key, err)
				}
			}
			if n := len(theirs) / torchSteps; n != len(ours) {
				t.Errorf("%s %s: torch has %d tensors per step, we %d", name(c.opt), c.dt, n, len(ours))
			}
		}
		// The magnitude guard: torch's params moved away from the initial values.
		for _, n := range names {
			p1, p10 := theirs[n+"__p1"], theirs[fmt.Sprintf("%s__p%d", n, torchSteps)]
			if bytes.Equal(p1.Data, p10.Data) {
				t.Errorf("%s %s: torch's %s did not change from step 1 to %d", name(c.opt), c.dt, n, torchSteps)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(agree)) {
		a := agree[id]
		t.Logf("%-24s max %5d ulp, max abs %.3g, max rel %.3g, normwise %.3g, %d of %d elements differ", id, a.maxULP, a.maxAbs, a.maxRel, a.maxNorm, a.differ, a.elem)
	}
}
