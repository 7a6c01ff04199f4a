package usercheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tessera-qa/tessera-qa/differential"
	"github.com/tessera-qa/tessera-qa/engine/autodiff"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/gradients"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/property"
	"github.com/tessera-qa/tessera-qa/sharded"
)

// manifest writes a replay manifest of case c for the failing row r and records it there.
func (s *state) manifest(c harness.Case, r *harness.Result) {
	if s.o.Artifacts == "" {
		r.Reason += " (no replay manifest: pass --artifacts DIR)"
		return
	}
	m, err := harness.ManifestFor(c, *r)
	if err == nil {
		r.Replay, err = harness.WriteManifest(s.o.Artifacts, m)
	}
	if err != nil {
		r.Reason += " (replay manifest not written: " + err.Error() + ")"
	}
}

// execOutput is the part of `tessera-qa exec --json` the second process is read for.
type execOutput struct {
	Outputs []struct {
		Name   string `json:"name"`
		Digest string `json:"digest"`
	} `json:"outputs"`
}

// otherProcess runs the graph in a second process (o.Self exec) on the same inputs and wants
// the same bits: the determinism contract holds process after process.
func (s *state) otherProcess(b backend.Backend, digests []string) {
	if s.o.Self == "" {
		s.add(s.row(CheckDetProcess, b, harness.VerdictSkip, "no program to start a second process with"))
		return
	}
	got, err := s.runChild(b)
	if err != nil {
		s.add(s.errRow(CheckDetProcess, b, harness.VerdictError, err))
		return
	}
	var diffs []string
	for i, v := range s.g.Outputs {
		if got[i] != digests[i] {
			diffs = append(diffs, fmt.Sprintf("output %%%s: digest %.16s in the second process, %.16s in this one", v.Name, got[i], digests[i]))
		}
	}
	if len(diffs) == 0 {
		s.add(s.row(CheckDetProcess, b, harness.VerdictPass, "a second process ("+filepath.Base(s.o.Self)+" exec) gave the same bits"))
		return
	}
	r := s.row(CheckDetProcess, b, harness.VerdictFail, strings.Join(diffs, "; "))
	r.ErrorCode = string(errs.Nondeterministic)
	c := s.harnessCase(CheckDetProcess)
	c.Tolerances, c.ExpectDigests = nil, got
	s.manifest(c, &r)
	s.add(r)
}

// runChild runs `Self exec` on the graph and inputs written to a temporary folder and returns
// its digest of each graph output, in order.
func (s *state) runChild(b backend.Backend) ([]string, error) {
	dir, err := os.MkdirTemp("", "tessera-qa-check-")
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "second process")
	}
	defer os.RemoveAll(dir)
	gp, ip, op := filepath.Join(dir, "graph.tg"), filepath.Join(dir, "in.npz"), filepath.Join(dir, "out.npz")
	if err := os.WriteFile(gp, []byte(graph.Print(s.g)), 0o644); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "second process")
	}
	names := slices.Sorted(maps.Keys(s.in))
	ts := make([]*tensor.Tensor, len(names))
	for i, n := range names {
		ts[i] = s.in[n]
	}
	if err := tensor.WriteNPZFile(ip, names, ts); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.o.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.o.Self, "exec", gp, "--in", ip, "--out", op, "--backend", b.Name(), "--json", "-")
	cmd.Env = append(os.Environ(), s.o.SelfEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, errs.New(errs.Timeout, "second process: no answer within %s", s.o.Timeout)
		}
		return nil, errs.New(errs.Internal, "second process %s exec: %v: %s", s.o.Self, err, oneLine(stderr.String()))
	}
	var eo execOutput
	if err := json.Unmarshal(stdout.Bytes(), &eo); err != nil {
		return nil, errs.New(errs.Internal, "second process: its JSON: %v", err)
	}
	byName := map[string]string{}
	for _, o := range eo.Outputs {
		byName[o.Name] = o.Digest
	}
	out := make([]string, len(s.g.Outputs))
	for i, v := range s.g.Outputs {
		d, ok := byName[v.Name]
		if !ok {
			return nil, errs.New(errs.Internal, "second process: no output %%%s in its answer", v.Name)
		}
		out[i] = d
	}
	return out, nil
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 400 {
		s = s[:400] + "..."
	}
	return s
}

// acrossBackends compares the bits of backends of one device class: the contract promises
// the same bits per device class, not across classes.
func (s *state) acrossBackends() {
	byClass := map[string][]string{}
	for _, b := range slices.Sorted(maps.Keys(s.digest)) {
		byClass[s.class[b]] = append(byClass[s.class[b]], b)
	}
	var diffs, same []string
	for _, class := range slices.Sorted(maps.Keys(byClass)) {
		bs := byClass[class]
		for _, b := range bs[1:] {
			if slices.Equal(s.digest[b], s.digest[bs[0]]) {
				same = append(same, bs[0]+" = "+b)
			} else {
				diffs = append(diffs, fmt.Sprintf("%s and %s (both %s) give different bits", bs[0], b, class))
			}
		}
	}
	switch {
	case len(diffs) > 0:
		r := s.row(CheckDetBackends, nil, harness.VerdictFail, strings.Join(diffs, "; "))
		r.ErrorCode = string(errs.Nondeterministic)
		s.add(r)
	case len(same) > 0:
		s.add(s.row(CheckDetBackends, nil, harness.VerdictPass, "same bits: "+strings.Join(same, ", ")))
	default:
		var ran []string
		for _, b := range slices.Sorted(maps.Keys(s.digest)) {
			ran = append(ran, b+" ("+s.class[b]+")")
		}
		s.add(s.row(CheckDetBackends, nil, harness.VerdictSkip,
			"the contract promises the same bits within one device class only, and no two backends that ran share one: "+strings.Join(ran, ", ")))
	}
}

// differential compares each backend that ran with the oracle, where every op of the graph
// maps (differential/mapping.go).
func (s *state) differential() error {
	if s.o.Oracle == OracleNone {
		s.add(s.row(CheckDifferential, nil, harness.VerdictSkip, "--oracle none"))
		return nil
	}
	fw := s.o.Oracle
	if fw == OracleAuto {
		fw = "torch"
	}
	check := CheckDifferential + "/" + fw
	if op := unmapped(s.g, fw); op != "" {
		s.add(s.row(check, nil, harness.VerdictSkip, fmt.Sprintf("op %s has no %s mapping (differential/mapping.go)", op, fw)))
		return nil
	}
	o, err := differential.Start(differential.Config{Framework: fw, Python: s.o.Python, Timeout: s.o.Timeout})
	if err != nil {
		if s.o.Oracle != OracleAuto {
			return err
		}
		r := s.row(check, nil, harness.VerdictSkip, "oracle "+fw+" cannot start here: "+err.Error())
		r.ErrorCode = string(errs.CodeOf(err))
		s.add(r)
		return nil
	}
	defer o.Close()
	for _, b := range s.o.Backends {
		if _, ran := s.digest[b.Name()]; !ran {
			s.add(s.row(check, b, harness.VerdictSkip, "the graph did not run on "+b.Name()))
			continue
		}
		s.add(s.oracleRow(o, check, b))
	}
	return nil
}

// unmapped returns the first op of g the framework has no mapping for ("" when all map).
func unmapped(g *graph.Graph, fw string) string {
	for _, n := range g.Nodes {
		m, ok := differential.MappingOf(n.Op)
		if !ok || fw == "torch" && m.Torch == "" || fw == "jax" && m.JAX == "" {
			return n.Op
		}
	}
	return ""
}

// oracleRow runs the engine on b and the oracle on the matching device and compares them.
// Both are judged against the truth by the golden-model tolerance, so they may be twice that
// apart.
func (s *state) oracleRow(o *differential.Oracle, check string, b backend.Backend) harness.Result {
	device := "cpu"
	if b.Name() == "cuda" {
		device = "cuda"
	}
	if !o.Hello().HasDevice(device) {
		return s.row(check, b, harness.VerdictSkip, fmt.Sprintf("%s has no %s device here", o.Describe(), device))
	}
	got, err := differential.RunEngine(b, s.g, s.in)
	if err != nil {
		return s.errRow(check, b, harness.VerdictError, err)
	}
	want, mode, err := o.RunGraph(differential.Target{Device: device}, s.g, s.in)
	if err != nil {
		return s.errRow(check, b, harness.VerdictError, err)
	}
	var problems []string
	for i, v := range s.g.Outputs {
		tol := s.tols[i]
		if !tol.Bitwise {
			tol.RTol, tol.ATol = 2*tol.RTol, 2*tol.ATol
		}
		if c := harness.Check(got[i], want[i], tol); !c.Pass {
			problems = append(problems, fmt.Sprintf("output %%%s: %s", v.Name, c.Reason))
		}
	}
	if len(problems) == 0 {
		return s.row(check, b, harness.VerdictPass, fmt.Sprintf("every output agrees with %s (%s) within twice the golden tolerance", o.Describe(), mode))
	}
	r := s.row(check, b, harness.VerdictFail, o.Describe()+": "+strings.Join(problems, "; ")+" (the manifest replays against the golden model)")
	s.manifest(s.harnessCase(check), &r)
	return r
}

// gradients judges reverse mode on b against float64 finite differences (gradients.Check)
// with grad/agree's budget for a graph of unknown conditioning (property.AgreeTol).
func (s *state) gradients(b backend.Backend) {
	dt, ok := lowestFloat(s.g)
	if !ok {
		s.add(s.row(CheckGradients, b, harness.VerdictSkip, "no float input to differentiate"))
		return
	}
	if _, err := autodiff.VJP(s.g); err != nil {
		s.add(s.row(CheckGradients, b, harness.VerdictSkip, "not differentiable: "+err.Error()))
		return
	}
	gc := gradients.Case{Name: s.g.Name + "/" + CheckGradients, DType: dt, Graph: s.g, Inputs: s.in, Seed: s.o.Seed}
	tol, ok, err := property.AgreeTol(gc)
	if err != nil {
		s.add(s.errRow(CheckGradients, b, harness.VerdictError, err))
		return
	}
	if !ok {
		s.add(s.row(CheckGradients, b, harness.VerdictSkip, "the gradient is too ill-conditioned in "+dt.String()+" to judge at these inputs"))
		return
	}
	gc.Tol = tol
	res := gradients.Check(b, gc)
	if res.Pass {
		worst := 0.0
		for _, in := range res.Inputs {
			worst = max(worst, in.NormErr, in.DirErr)
		}
		s.add(s.row(CheckGradients, b, harness.VerdictPass, fmt.Sprintf("%d inputs: reverse mode within %.2g (budget %.2g) of float64 finite differences", len(res.Inputs), worst, tol.RTol)))
		return
	}
	reason := res.Err
	for _, in := range res.Inputs {
		if in.Fail != "" {
			reason += fmt.Sprintf("; grad %%%s: %s", in.Name, in.Fail)
		}
	}
	r := s.row(CheckGradients, b, harness.VerdictFail, strings.TrimPrefix(reason, "; "))
	// The manifest replays the backward graph against the golden model's backward.
	if vg, feed, want, err := gradients.Backward(gc); err == nil {
		k := property.Reductions(vg)
		c := harness.Case{Suite: Suite, Name: s.g.Name + "/" + CheckGradients, Graph: vg, Inputs: feed, Seed: s.o.Seed, Labels: []string{Suite, CheckGradients}}
		for i, v := range vg.Outputs {
			var w *tensor.Tensor
			if j := i - len(s.g.Outputs); j >= 0 && j < len(want) {
				w = want[j]
			}
			c.Tolerances = append(c.Tolerances, property.Tolerance(v.Type.DType, k[i], w))
		}
		s.manifest(c, &r)
	}
	s.add(r)
}

// lowestFloat is the float input dtype with the loosest default tolerance.
func lowestFloat(g *graph.Graph) (numerics.DType, bool) {
	var best numerics.DType
	found := false
	for _, v := range g.Inputs {
		dt := v.Type.DType
		if !dt.IsFloat() {
			continue
		}
		if !found || harness.DefaultTolerance(dt).RTol > harness.DefaultTolerance(best).RTol {
			best, found = dt, true
		}
	}
	return best, found
}

// Relations returns the metamorphic relations (property.All with Ops) that cover an op of g.
func Relations(g *graph.Graph) []property.Property {
	ops := map[string]bool{}
	for _, n := range g.Nodes {
		ops[n.Op] = true
	}
	var out []property.Property
	for _, p := range property.All() {
		if slices.ContainsFunc(p.Ops, func(op string) bool { return ops[op] }) {
			out = append(out, p)
		}
	}
	return out
}

// metamorphic runs each relation that covers an op of the graph on b, on the relation's own
// random graphs of that op (a relation is an identity of the op, not of this graph).
func (s *state) metamorphic(b backend.Backend) {
	rels := Relations(s.g)
	if len(rels) == 0 {
		var ops []string
		for _, n := range s.g.Nodes {
			if !slices.Contains(ops, n.Op) {
				ops = append(ops, n.Op)
			}
		}
		s.add(s.row(CheckMetamorphic, b, harness.VerdictSkip, "no metamorphic relation covers its ops ("+strings.Join(ops, ", ")+")"))
		return
	}
	for _, p := range rels {
		check := CheckMetamorphic + "/" + strings.TrimPrefix(p.Name, "meta/")
		oc := property.Run(property.RunOptions{Properties: []property.Property{p}, Backends: []backend.Backend{b},
			Config: property.SmallConfig(), Checks: s.o.MetaChecks, Seed: s.o.Seed, Artifacts: s.o.Artifacts})[0]
		verdict := map[string]string{property.Pass: harness.VerdictPass, property.Fail: harness.VerdictFail, property.Skip: harness.VerdictSkip}[oc.Verdict]
		reason := fmt.Sprintf("%s: %d cases of %s passed (seed %d)", p.Name, oc.Passed, strings.Join(p.Ops, "/"), oc.Seed)
		if oc.Verdict != property.Pass {
			reason = p.Name + ": " + oc.Reason
		}
		r := s.row(check, b, verdict, reason)
		r.Seed, r.Replay = oc.Seed, oc.Replay
		s.add(noReplayNote(r))
	}
}

// sharded runs the graph over --mesh (in-process ranks, deterministic mode) and compares the
// assembled outputs with the one-device run on the same backend.
func (s *state) sharded(b backend.Backend) {
	if s.o.Mesh == "" {
		s.add(s.row(CheckSharded, b, harness.VerdictSkip, "no --mesh given"))
		return
	}
	k := slices.Max(property.Reductions(s.g))
	c := sharded.Case{Name: s.g.Name + "/" + s.o.Mesh, Graph: s.g, Mesh: s.o.Mesh, Layouts: s.o.Layouts, K: k, Seed: s.o.Seed, Inputs: s.in}
	check := CheckSharded + "/" + s.o.Mesh
	out, err := c.Run(b, dist.Deterministic)
	if err != nil {
		code := errs.CodeOf(err)
		verdict := harness.VerdictError
		if code == errs.Input || code == errs.Shape || code == errs.Parse || code == errs.Unsupported {
			verdict = harness.VerdictSkip // the mesh or a layout does not fit this graph
		}
		s.add(s.errRow(check, b, verdict, err))
		return
	}
	// A program whose collectives only move data computes every element as one device does
	// (the pencil FFT, data-parallel rows): then nothing less than the same bits passes.
	bitwise := len(sharded.Reducing(out.Program)) == 0
	var problems []string
	for i, v := range s.g.Outputs {
		if res := harness.Check(out.Whole[i], out.Single[i], c.Tolerance(v.Type.DType)); !res.Pass {
			problems = append(problems, fmt.Sprintf("output %%%s: %s", v.Name, res.Reason))
		} else if bitwise && !bytes.Equal(out.Whole[i].Data, out.Single[i].Data) {
			problems = append(problems, fmt.Sprintf("output %%%s: bits differ from the one-device run although the program's collectives only move data", v.Name))
		}
	}
	if len(problems) == 0 {
		how := "agree with the one-device run"
		if bitwise {
			how = "give the one-device run's bits (the collectives only move data)"
		}
		s.add(s.row(check, b, harness.VerdictPass, fmt.Sprintf("%d ranks %s (collectives: %s)", len(out.Ranks), how, strings.Join(sharded.Collectives(out.Program), ", "))))
		return
	}
	r := s.row(check, b, harness.VerdictFail, strings.Join(problems, "; ")+
		" (no replay manifest for sharded programs: re-run with the same --mesh, --layout and --seed)")
	s.add(r)
}
