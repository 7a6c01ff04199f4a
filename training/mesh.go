package training

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/autodiff"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/dtensor"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/dist/run"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/profile"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Tensor parallelism. With a tp axis in Config.Mesh, the whole step (forward, loss and the
// autodiff gradient of the global batch) is compiled once for the mesh by the compiler's shard
// pass (compiler.CompileDist) from the layouts below, and each rank runs its SPMD program
// (engine/dist/run): the batch is split over dp, the weights as Megatron-LM splits them over
// tp (the first matmul of each pair by columns, the second by rows, so each pair needs one
// all_reduce over tp forward), and the pass inserts every collective, the gradients' sum over
// dp included. Each rank keeps and updates only its blocks of the parameters.

// TPLayouts is how the inputs of m (built for the global batch) lie on a mesh of dp and tp
// axes (either may be absent). A name the map lacks is replicated.
func TPLayouts(m *Model, ms *mesh.Mesh) (map[string]mesh.Layout, error) {
	text := map[string]string{}
	for _, a := range ms.Axes {
		if a.Name != "dp" && a.Name != "tp" {
			return nil, errs.New(errs.Input, "train: mesh %s: axis %q; train knows dp (data) and tp (tensor) parallelism", ms, a.Name)
		}
	}
	if ms.AxisIndex("dp") >= 0 {
		text["x"], text["target"] = "[S(dp),R]", "[S(dp),R]"
		if m.Name == FNOModel { // x is [B, C, H, W]; the target's rows are (b, h, w), b outermost
			text["x"] = "[S(dp),R,R,R]"
		}
	}
	if ms.AxisIndex("tp") >= 0 {
		switch m.Name {
		case "mlp":
			text["w1"], text["b1"], text["w2"] = "col:tp", "[S(tp)]", "row:tp"
		case "transformer-block":
			for _, n := range []string{"wq", "wk", "wv", "w1"} {
				text[n] = "col:tp"
			}
			text["b1"], text["wo"], text["w2"] = "[S(tp)]", "row:tp", "row:tp"
		case FNOModel:
			// Output channels over tp: the spectral weights [in, out, m1, m2, 2] (or the CP
			// factor of the out channels), the 1x1 path by columns; the projection by rows
			// (its one all_reduce forward), the lift replicated (fno.go, docs/spectral.md).
			text["spec1"], text["spec2"] = "[R,S(tp),R,R,R]", "[R,S(tp),R,R,R]"
			text["spec1_v"], text["spec2_v"] = "[S(tp),R,R]", "[S(tp),R,R]"
			text["lin_w"], text["lin_b"], text["proj_w"] = "col:tp", "[S(tp)]", "row:tp"
		}
	}
	out := map[string]mesh.Layout{}
	for name, t := range text {
		v := m.Graph.Value(name)
		if v == nil { // the other parameterisation's weights
			continue
		}
		l, err := mesh.ParseLayout(t, v.Type.Rank())
		if err != nil {
			return nil, errs.Wrap(errs.Internal, err, "train: layout of %s", name)
		}
		if err := ms.Check(name, l, v.Type.Shape); err != nil {
			return nil, errs.Wrap(errs.Input, err, "train: model %s on mesh %s", m.Name, ms)
		}
		out[name] = l
	}
	return out, nil
}

// meshStep is one rank's compiled step on the mesh.
type meshStep struct {
	m       *Model
	ms      *mesh.Mesh
	layouts map[string]mesh.Layout
	prog    *compiler.DistProgram
	groups  *dtensor.Groups
	be      backend.Backend
	timeout time.Duration
	sink    profile.Sink
}

func (s *meshStep) profileTo(sink profile.Sink) { s.sink = sink }

func newMeshStep(cfg Config, ms *mesh.Mesh, timeout time.Duration) (*meshStep, error) {
	if cfg.Comm == nil {
		return nil, errs.New(errs.Input, "train: mesh %s needs a communicator of its %d ranks", ms, ms.World())
	}
	groups, err := dtensor.NewGroups(ms, cfg.Comm)
	if err != nil {
		return nil, err
	}
	m, err := Build(cfg.Model, cfg.DType, cfg.Dims, cfg.Dims.Batch)
	if err != nil {
		return nil, err
	}
	layouts, err := TPLayouts(m, ms)
	if err != nil {
		return nil, err
	}
	gg, err := autodiff.Grad(m.Graph, "loss", m.Params...)
	if err != nil {
		return nil, err
	}
	prog, err := compiler.CompileDist(gg, compiler.Options{Mesh: ms, Layouts: layouts})
	if err != nil {
		return nil, errs.Wrap(errs.CodeOf(err), err, "train: model %s on mesh %s", m.Name, ms)
	}
	return &meshStep{m: m, ms: ms, layouts: layouts, prog: prog, groups: groups, be: cfg.Backend, timeout: timeout}, nil
}

// block is this rank's block of a whole tensor of input name.
func (s *meshStep) block(name string, global *tensor.Tensor) (*tensor.Tensor, error) {
	l, ok := s.layouts[name]
	if !ok {
		l = mesh.Replicated(len(global.Shape))
	}
	return dtensor.Shard(s.ms, name, l, global, s.groups.Rank())
}

// init is this rank's blocks of the initial parameters (drawn whole, as on one rank).
func (s *meshStep) init(seed uint64) (map[string]*tensor.Tensor, error) {
	out := map[string]*tensor.Tensor{}
	for name, t := range s.m.Init(seed) {
		b, err := s.block(name, t)
		if err != nil {
			return nil, err
		}
		out[name] = b
	}
	return out, nil
}

// step runs the rank program on this rank's blocks of the batch and the parameters and
// returns the loss (the same on every rank) and the gradients of its parameter blocks.
func (s *meshStep) step(ctx context.Context, seed uint64, step int, params map[string]*tensor.Tensor) (*tensor.Tensor, map[string]*tensor.Tensor, error) {
	x, t := s.m.Batch(seed, step, 0, 1)
	feed := map[string]*tensor.Tensor{}
	var err error
	if feed["x"], err = s.block("x", x); err != nil {
		return nil, nil, err
	}
	if feed["target"], err = s.block("target", t); err != nil {
		return nil, nil, err
	}
	for k, v := range params {
		feed[k] = v
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout*time.Duration(len(s.prog.Steps)+1))
	defer cancel()
	outs, err := run.RankProfiled(cctx, s.prog, s.be, s.groups, feed, s.sink)
	if err != nil {
		// The program's collectives sum the gradients over dp: nothing to average after it.
		return nil, nil, errs.Wrap(errs.CodeOf(err), err, "train: step %d on rank %d of mesh %s", step, s.groups.Rank(), s.ms)
	}
	grads := map[string]*tensor.Tensor{}
	for i, name := range s.m.Params {
		grads[name] = outs[1+i]
	}
	return outs[0], grads, nil
}

// digest is the digest of the whole parameters, gathered from every rank's blocks: the same on
// every rank, and in the form a one-rank run's digest takes.
func (s *meshStep) digest(ctx context.Context, params map[string]*tensor.Tensor) (string, error) {
	whole := map[string]*tensor.Tensor{}
	for _, name := range s.m.Params {
		v := s.m.Graph.Value(name)
		l, ok := s.layouts[name]
		if !ok {
			whole[name] = params[name]
			continue
		}
		d, err := dtensor.New(s.ms, name, l, v.Type.Shape, params[name])
		if err != nil {
			return "", err
		}
		cctx, cancel := context.WithTimeout(ctx, s.timeout)
		d, err = d.Redistribute(cctx, s.groups, mesh.Replicated(l.Rank()))
		cancel()
		if err != nil {
			return "", errs.Wrap(errs.CodeOf(err), err, "train: gathering %s for the digest", name)
		}
		whole[name] = d.Local
	}
	return Digest(s.m, whole), nil
}

// layoutText is the checkpoint manifest's description of the blocks.
func (s *meshStep) layoutText() string {
	return fmt.Sprintf("mesh %s, blocks by training.TPLayouts", s.ms)
}

func (s *meshStep) model() *Model { return s.m }

func (s *meshStep) mesh() string { return s.ms.String() }

// agree returns, on every rank, an error when any rank's finiteness check failed (local is this
// rank's): its own E_NAN_INF on the failing ranks, E_NAN_INF with the count on the others; or the
// all_reduce's own error. One all_reduce of a count over the mesh.
func (s *meshStep) agree(ctx context.Context, local error, step int) error {
	bad := 0.0
	if local != nil {
		bad = 1
	}
	send := tensor.FromFloat64(numerics.F32, []int{1}, []float64{bad})
	recv := make([]byte, len(send.Data))
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	t0, w0 := time.Now(), s.groups.World.Waited()
	if err := s.groups.World.AllReduce(cctx, numerics.F32, send.Data, recv, dist.Sum); err != nil {
		return errs.Wrap(errs.CodeOf(err), err, "train: step %d on rank %d: agreeing on finite gradients", step, s.groups.Rank())
	}
	if s.sink != nil {
		s.sink.Collective(profile.Collective{Op: "all_reduce (finite check)", Bytes: int64(len(send.Data)), Peers: s.groups.World.World() - 1,
			Mode: s.groups.World.Mode().String(), Start: t0, Dur: time.Since(t0), Wait: s.groups.World.Waited() - w0})
	}
	if local != nil {
		return local
	}
	if n := math.Float32frombits(binary.LittleEndian.Uint32(recv)); n > 0 {
		return errs.New(errs.NaNInf, "train: step %d on rank %d: %.0f rank(s) of mesh %s found NaN or Inf in their loss or gradient blocks; the step is not applied", step, s.groups.Rank(), n, s.ms)
	}
	return nil
}
