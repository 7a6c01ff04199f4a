package golden

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/run"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/ref"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/harness"
)

// DistTimeout bounds one multi-rank golden run (every collective has its own deadline,
// dist.Options.Timeout, inside it).
const DistTimeout = 30 * time.Second

// CheckDist runs a multi-rank golden case the way the engine runs a rank program: compiled
// with compiler.CompileDist, every rank a goroutine over the in-process transport
// (run.Inproc) with communicators in opts.Mode, segments between collectives on b. Every
// rank's outputs are compared with the stored ones under the stored tolerances. Outputs are
// reported per rank ("%t0@rank1"); Digest covers every rank's outputs in rank order; Labels
// carry the transport and the mode. A backend that is not available gives a skip verdict. It
// never panics.
func CheckDist(c GoldenCase, b backend.Backend, opts dist.Options) harness.Result {
	r := newDistResult(c, b)
	r.Labels = []string{"inproc", opts.Mode.String()}
	if r.Verdict != "" {
		return r
	}
	start := time.Now()
	var dp *compiler.DistProgram
	err := protect("compile", func() (err error) { dp, err = compiler.CompileDist(c.Graph, compiler.Options{}); return })
	r.Timing.CompileMS = msSince(start)
	if err == nil && dp == nil {
		err = errs.New(errs.Internal, "compile: no program and no error")
	}
	if err != nil {
		return errored(r, err)
	}
	r.ScheduleHash = dp.ScheduleHash
	var got [][]*tensor.Tensor
	t0 := time.Now()
	err = protect("run", func() (err error) {
		ctx, cancel := context.WithTimeout(context.Background(), DistTimeout)
		defer cancel()
		got, err = run.Inproc(ctx, dp, b, opts, c.RankInputs)
		return
	})
	r.Timing.RunMS = msSince(t0)
	if err != nil {
		return errored(r, err)
	}
	r = compareRanks(r, c, got)
	r.Timing.TotalMS = msSince(start)
	return r
}

// newDistResult is newResult for a multi-rank case; input digests are keyed "x@rank1".
func newDistResult(c GoldenCase, b backend.Backend) harness.Result {
	r := harness.Result{Schema: harness.ResultSchema, Suite: Suite, Case: c.Name, Seed: c.Seed,
		Outputs: []harness.OutputResult{}, Env: harness.CaptureEnv(b)}
	if b == nil {
		return errored(r, errs.New(errs.Input, "golden case %s: no backend", c.Name))
	}
	r.Backend, r.Device, r.DeviceClass = r.Env.Backend, r.Env.Device, r.Env.DeviceClass
	if c.World == 0 || c.Graph == nil || c.Graph.Mesh == nil || c.Graph.Mesh.World() != c.World ||
		len(c.RankInputs) != c.World || len(c.RankWant) != c.World || len(c.Tolerances) != len(c.Graph.Outputs) {
		return errored(r, errs.New(errs.Input, "golden case %s: not a well-formed multi-rank case (graph mesh, ranks' inputs and outputs, tolerances do not match)", c.Name))
	}
	for rank, w := range c.RankWant {
		if len(w) != len(c.Graph.Outputs) {
			return errored(r, errs.New(errs.Input, "golden case %s: rank %d has %d expected outputs for %d graph outputs", c.Name, rank, len(w), len(c.Graph.Outputs)))
		}
	}
	r.InputDigests = map[string]string{}
	for rank, in := range c.RankInputs {
		for name, t := range in {
			r.InputDigests[rankKey(name, rank)] = t.Digest()
		}
	}
	if err := b.Available(); err != nil {
		r.Verdict, r.Reason, r.ErrorCode = harness.VerdictSkip, err.Error(), string(errs.CodeOf(err))
	}
	return r
}

func rankKey(name string, rank int) string { return fmt.Sprintf("%s@rank%d", name, rank) }

// compareRanks fills the per-rank output results and the verdict from got[rank][i].
func compareRanks(r harness.Result, c GoldenCase, got [][]*tensor.Tensor) harness.Result {
	var problems []string
	for rank, in := range c.RankInputs {
		for _, name := range slices.Sorted(maps.Keys(in)) {
			if in[name].Digest() != r.InputDigests[rankKey(name, rank)] {
				problems = append(problems, fmt.Sprintf("rank %d: the run modified input %%%s", rank, name))
			}
		}
	}
	if len(got) != c.World {
		problems = append(problems, fmt.Sprintf("the run returned outputs for %d ranks, want %d", len(got), c.World))
	}
	var all []*tensor.Tensor
	t0 := time.Now()
	for rank := range c.World {
		var outs []*tensor.Tensor
		if rank < len(got) {
			outs = got[rank]
		}
		if len(outs) != len(c.Graph.Outputs) {
			problems = append(problems, fmt.Sprintf("rank %d returned %d outputs, want %d", rank, len(outs), len(c.Graph.Outputs)))
		}
		for i, v := range c.Graph.Outputs {
			var g *tensor.Tensor
			if i < len(outs) {
				g = outs[i]
			}
			all = append(all, g)
			o := harness.OutputResult{Name: rankKey("%"+v.Name, rank), DType: v.Type.DType.String(), Shape: slices.Clone(v.Type.Shape),
				Digest: harness.Digests([]*tensor.Tensor{g})[0], Check: harness.Check(g, c.RankWant[rank][i], c.Tolerances[i])}
			if !o.Check.Pass {
				problems = append(problems, fmt.Sprintf("rank %d output %%%s vs %s: %s", rank, v.Name, c.File, o.Check.Reason))
			}
			r.Outputs = append(r.Outputs, o)
		}
	}
	r.Timing.CheckMS = msSince(t0)
	r.Digest = harness.CombinedDigest(all)
	r.Verdict = harness.VerdictPass
	if len(problems) > 0 {
		r.Verdict, r.Reason = harness.VerdictFail, strings.Join(problems, "; ")
	}
	return r
}

// checkReferenceDist is CheckReference for a multi-rank case: ref.RunDist on the stored
// inputs against the stored outputs.
func checkReferenceDist(c GoldenCase) harness.Result {
	r := newDistResult(c, refBackend{})
	if r.Verdict != "" {
		return r
	}
	start := time.Now()
	var got [][]*tensor.Tensor
	if err := protect("run", func() (err error) { got, err = ref.RunDist(c.Graph, c.RankInputs); return }); err != nil {
		return errored(r, err)
	}
	r.Timing.RefMS = msSince(start)
	r = compareRanks(r, c, got)
	r.Timing.TotalMS = msSince(start)
	return r
}
