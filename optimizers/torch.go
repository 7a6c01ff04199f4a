package optimizers

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/optim"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

//go:embed torch_optim.py
var torchScript []byte

// TorchDTypes are the param dtypes compared with torch: torch keeps 16-bit params' state in
// their own dtype and rounds after every op, while engine/optim computes them in f32 (its
// package doc), so 16-bit runs are compared with the reference only.
var TorchDTypes = []numerics.DType{numerics.F32, numerics.F64}

// torchCase is one optimizer run in the script's JSON.
type torchCase struct {
	Opt    string         `json:"opt"`
	In     string         `json:"in"`
	Out    string         `json:"out"`
	Params []string       `json:"params"`
	Steps  int            `json:"steps"`
	Hyper  map[string]any `json:"hyper"`
	LRs    []float64      `json:"lrs"`
}

// TorchReport is what CheckTorch found: one line per disagreement, and torch's version line.
type TorchReport struct {
	Torch    string
	Problems []string
	Runs     int
}

// CheckTorch runs every configuration in TorchDTypes through torch.optim (one interpreter,
// python naming it or found as differential finds its oracles), the reference and the engine
// on b, and compares torch with the reference bit for bit and the engine with torch under the
// engine's bound. No interpreter with torch: E_NO_DEVICE.
func CheckTorch(b backend.Backend, python, dir string) (TorchReport, error) {
	py, err := differential.Interpreter(python, "torch", "numpy")
	if err != nil {
		return TorchReport{}, err
	}
	script := filepath.Join(dir, "torch_optim.py")
	if err := os.WriteFile(script, torchScript, 0o644); err != nil {
		return TorchReport{}, errs.Wrap(errs.Input, err, "optimizers: writing the torch script")
	}
	var probs []Problem
	var cases []torchCase
	for ci, c := range Configs() {
		for _, dt := range TorchDTypes {
			pr := NewProblem(ci, c, dt)
			tc, err := writeTorchCase(dir, len(cases), pr)
			if err != nil {
				return TorchReport{}, err
			}
			probs, cases = append(probs, pr), append(cases, tc)
		}
	}
	spec, _ := json.Marshal(cases)
	specPath := filepath.Join(dir, "cases.json")
	if err := os.WriteFile(specPath, spec, 0o644); err != nil {
		return TorchReport{}, errs.Wrap(errs.Input, err, "optimizers: writing the cases")
	}
	out, err := exec.Command(py, script, specPath).CombinedOutput()
	if err != nil {
		return TorchReport{}, errs.New(errs.Internal, "optimizers: %s %s: %v: %s", py, script, err, strings.TrimSpace(string(out)))
	}
	rep := TorchReport{Torch: strings.TrimSpace(string(out)) + " (" + py + ")", Runs: len(cases)}
	for i, pr := range probs {
		theirs, err := readTorchRun(cases[i].Out, pr)
		if err != nil {
			return TorchReport{}, err
		}
		ours, err := RunEngine(b, pr)
		if err != nil {
			return TorchReport{}, fmt.Errorf("%s %s: %w", pr.Config.Name, pr.DType, err)
		}
		for _, l := range Compare(pr, RunReference(pr), theirs, Bitwise) {
			rep.Problems = append(rep.Problems, fmt.Sprintf("reference vs torch, %s %s: %s", pr.Config.Name, pr.DType, l))
		}
		for _, l := range Compare(pr, ours, theirs, EngineBound(pr.DType)) {
			rep.Problems = append(rep.Problems, fmt.Sprintf("engine vs torch, %s %s: %s", pr.Config.Name, pr.DType, l))
		}
	}
	return rep, nil
}

func hyper(o optim.Optimizer) (string, map[string]any) {
	switch o := o.(type) {
	case optim.SGD:
		return "sgd", map[string]any{"lr": o.LR, "momentum": o.Momentum, "dampening": o.Dampening, "weight_decay": o.WeightDecay, "nesterov": o.Nesterov}
	case optim.AdamW:
		return "adamw", map[string]any{"lr": o.LR, "beta1": o.Beta1, "beta2": o.Beta2, "eps": o.Eps, "weight_decay": o.WeightDecay}
	}
	panic(fmt.Sprintf("optimizers: unknown optimizer %T", o))
}

// writeTorchCase writes the problem's inputs as the script reads them: "<param>__p0" and
// "<param>__g<k>".
func writeTorchCase(dir string, i int, pr Problem) (torchCase, error) {
	kind, h := hyper(pr.Config.Opt)
	tc := torchCase{Opt: kind, Params: pr.Names, Steps: Steps, Hyper: h, LRs: pr.LRs,
		In: filepath.Join(dir, fmt.Sprintf("in%d.npz", i)), Out: filepath.Join(dir, fmt.Sprintf("out%d.npz", i))}
	var names []string
	var arrs []*tensor.Tensor
	for _, n := range pr.Names {
		names, arrs = append(names, n+"__p0"), append(arrs, pr.Init[n])
	}
	for k, g := range pr.Grads {
		for _, n := range pr.Names {
			names, arrs = append(names, fmt.Sprintf("%s__g%d", n, k+1)), append(arrs, g[n])
		}
	}
	if err := tensor.WriteNPZFile(tc.In, names, arrs); err != nil {
		return torchCase{}, err
	}
	return tc, nil
}

// readTorchRun reads the script's output back as snapshots: "<param>__p<k>" is the param,
// "<param>__<buffer><k>" its buffer after step k.
func readTorchRun(path string, pr Problem) ([]Snapshot, error) {
	arrays, err := tensor.ReadNPZFile(path)
	if err != nil {
		return nil, err
	}
	byName := map[string]*tensor.Tensor{}
	for _, a := range arrays {
		t, err := a.As(pr.DType)
		if err != nil {
			return nil, errs.Wrap(errs.DType, err, "optimizers: torch's %s", a.Name)
		}
		byName[a.Name] = t
	}
	out := make([]Snapshot, Steps)
	for k := 1; k <= Steps; k++ {
		snap := Snapshot{}
		sfx := fmt.Sprint(k)
		for name, t := range byName {
			base, ok := strings.CutSuffix(name, sfx)
			if !ok || strings.ContainsAny(base[len(base)-1:], "0123456789") {
				continue
			}
			param, what, _ := strings.Cut(base, "__")
			if what == "p" {
				snap[param] = t
			} else {
				snap[param+"/"+what] = t
			}
		}
		out[k-1] = snap
	}
	return out, nil
}
