// Package strategies measures what each parallel strategy does to the numbers: one training
// step of a model from the same initial parameters on one rank and on data-, tensor- and
// pipeline-parallel meshes (and their combinations, up to 8 ranks), in the communicators'
// deterministic and exact modes, with the largest loss and gradient difference against the one
// rank and whether the bits match. It is the table of docs/training.md ("Determinism across
// strategies"), printed by `tessera-qa train --strategies`.
package strategies

import (
	"context"
	"fmt"
	"io"
	"math"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/dtensor"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
	"github.com/tessera-qa/tessera-qa/training"
)

// Strategy is one mesh ("" for one rank) with, for a pp axis, its schedule and micro-batches.
type Strategy struct {
	Mesh     string
	Schedule string
	Micro    int
}

func (s Strategy) String() string {
	if s.Mesh == "" {
		return "1 rank"
	}
	if s.Schedule != "" {
		return fmt.Sprintf("%s %s m=%d", s.Mesh, s.Schedule, s.Micro)
	}
	return s.Mesh
}

// Default is the table's rows: every strategy the engine has, alone and combined, to 8 ranks.
// The ep rows apply to the moe model only, the tp and pp rows to the others.
var Default = []Strategy{
	{Mesh: ""},
	{Mesh: "dp=2"}, {Mesh: "dp=4"}, {Mesh: "dp=8"},
	{Mesh: "tp=2"}, {Mesh: "tp=4"}, {Mesh: "dp=2,tp=2"}, {Mesh: "dp=4,tp=2"}, {Mesh: "dp=2,tp=4"},
	{Mesh: "pp=1", Schedule: "1f1b", Micro: 4},
	{Mesh: "pp=2", Schedule: "1f1b", Micro: 4}, {Mesh: "pp=4", Schedule: "1f1b", Micro: 8},
	{Mesh: "pp=4", Schedule: "gpipe", Micro: 8}, {Mesh: "pp=4", Schedule: "interleaved", Micro: 8},
	{Mesh: "dp=2,pp=2", Schedule: "1f1b", Micro: 4}, {Mesh: "dp=2,pp=4", Schedule: "1f1b", Micro: 8},
	{Mesh: "dp=4,pp=2", Schedule: "1f1b", Micro: 4},
	{Mesh: "ep=2"}, {Mesh: "ep=4"}, {Mesh: "dp=2,ep=2"}, {Mesh: "dp=2,ep=4"}, {Mesh: "dp=4,ep=2"},
}

// Row is one strategy in one mode.
type Row struct {
	Strategy string  `json:"strategy"`
	Ranks    int     `json:"ranks"`
	Mode     string  `json:"mode"`
	LossDiff float64 `json:"loss_diff"` // |loss - one rank's loss|
	GradDiff float64 `json:"grad_diff"` // max over every element of every rank's gradient
	LossBits bool    `json:"loss_bits"` // the loss has the one rank's bits
	GradBits bool    `json:"grad_bits"` // every gradient element has the one rank's bits
	// Repeat: a second run of the strategy gave the same loss and gradient bits.
	Repeat bool `json:"repeat"`
	// NA says why the model cannot take the strategy (too few nodes for the stages ...).
	NA string `json:"na,omitempty"`
}

// Dims is the model size of the table: a global batch that splits over 8 data-parallel ranks
// and over dp x micro-batches for every pipeline row.
func Dims(model string) training.Dims {
	d := training.DefaultDims(model)
	if model == "transformer-block" {
		d.Batch = 16
	}
	return d
}

// Table measures every strategy in every mode against one rank (deterministic mode).
func Table(ctx context.Context, model string, b backend.Backend, modes []dist.Mode, rows []Strategy) ([]Row, error) {
	base := func(s Strategy, mode dist.Mode) (training.Config, error) {
		opt, err := training.NewOptimizer("adamw", 1e-2, b)
		if err != nil {
			return training.Config{}, err
		}
		c := training.Config{Model: model, Dims: Dims(model), DType: numerics.F32, Steps: 1, Seed: 1, Backend: b, Optimizer: opt,
			Schedule: s.Schedule, MicroBatches: s.Micro, CommMode: mode}
		if s.Mesh != "" {
			if c.Mesh, err = mesh.ParseMesh(s.Mesh); err != nil {
				return c, errs.Wrap(errs.Input, err, "strategies")
			}
		}
		return c, nil
	}
	c, err := base(Strategy{}, dist.Deterministic)
	if err != nil {
		return nil, err
	}
	ref, err := training.FirstStep(ctx, c)
	if err != nil {
		return nil, err
	}
	var out []Row
	for _, s := range rows {
		for _, mode := range modes {
			c, err := base(s, mode)
			if err != nil {
				return nil, err
			}
			got, err := training.FirstStep(ctx, c)
			if errs.CodeOf(err) == errs.Unsupported {
				break // a strategy of another kind of model (ep without experts, tp or pp with them)
			}
			if errs.CodeOf(err) == errs.Input {
				out = append(out, Row{Strategy: s.String(), Mode: mode.String(), NA: err.Error()})
				continue
			}
			if err != nil {
				return nil, errs.Wrap(errs.CodeOf(err), err, "strategies: %s in %s mode", s, mode)
			}
			again, err := training.FirstStep(ctx, c)
			if err != nil {
				return nil, err
			}
			row := Row{Strategy: s.String(), Ranks: len(got.Grads), Mode: mode.String(),
				LossDiff: math.Abs(got.Loss.Float64(0) - ref.Loss.Float64(0)), LossBits: string(got.Loss.Data) == string(ref.Loss.Data), GradBits: true,
				Repeat: string(got.Loss.Data) == string(again.Loss.Data)}
			refBlocks, err := blocksOf(c, ref.Grads[0], len(got.Grads))
			if err != nil {
				return nil, err
			}
			for r, gs := range got.Grads {
				for name, g := range gs {
					e := refBlocks[r][name]
					if e == nil || e.TypeString() != g.TypeString() {
						return nil, errs.New(errs.Internal, "strategies: %s rank %d: gradient %s is %s, the reference block %v", s, r, name, g.TypeString(), e)
					}
					if string(e.Data) != string(g.Data) {
						row.GradBits = false
					}
					if string(again.Grads[r][name].Data) != string(g.Data) {
						row.Repeat = false
					}
					for i := range g.Len() {
						row.GradDiff = math.Max(row.GradDiff, math.Abs(g.Float64(i)-e.Float64(i)))
					}
				}
			}
			out = append(out, row)
		}
	}
	return out, nil
}

// blocksOf is, per world rank, the blocks of the one-rank gradients that rank holds: the whole
// tensors without a tp axis, the tensor-parallel blocks (training.TPLayouts) with one.
func blocksOf(c training.Config, whole map[string]*tensor.Tensor, world int) ([]map[string]*tensor.Tensor, error) {
	out := make([]map[string]*tensor.Tensor, world)
	if c.Mesh == nil || c.Mesh.AxisIndex("tp") < 0 {
		for r := range out {
			out[r] = whole
		}
		return out, nil
	}
	m, err := training.Build(c.Model, c.DType, c.Dims, c.Dims.Batch)
	if err != nil {
		return nil, err
	}
	layouts, err := training.TPLayouts(m, c.Mesh)
	if err != nil {
		return nil, err
	}
	for r := range out {
		out[r] = map[string]*tensor.Tensor{}
		for name, g := range whole {
			l, ok := layouts[name]
			if !ok {
				l = mesh.Replicated(len(g.Shape))
			}
			if out[r][name], err = dtensor.Shard(c.Mesh, name, l, g, r); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Write prints rows as a Markdown table.
func Write(w io.Writer, rows []Row) {
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	fmt.Fprintln(w, "| strategy | ranks | mode | max loss diff | max grad diff | loss bits = 1 rank | grad bits = 1 rank | bits repeat |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		if r.NA != "" {
			fmt.Fprintf(w, "| %s | - | %s | n/a | n/a | n/a | n/a | n/a: %s |\n", r.Strategy, r.Mode, r.NA)
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.3g | %.3g | %s | %s | %s |\n", r.Strategy, r.Ranks, r.Mode, r.LossDiff, r.GradDiff, yes(r.LossBits), yes(r.GradBits), yes(r.Repeat))
	}
}
