// Package run executes a compiled SPMD program (compiler.DistProgram) on one rank: segments
// between collectives run on a backend as ordinary Programs (their Tile IR kernels unchanged),
// collective steps run on the host through the rank's communicators (dtensor.Exec). Inproc
// runs every rank as a goroutine over engine/dist's in-process transport, and ShardInputs /
// AssembleOutputs move between whole tensors and the plan's blocks.
package run

import (
	"context"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/dtensor"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/profile"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// Rank runs dp on this rank: inputs are the rank's blocks by input name, the result its
// outputs in graph order. Every rank of the mesh must run the same program.
func Rank(ctx context.Context, dp *compiler.DistProgram, be backend.Backend, g *dtensor.Groups, inputs map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	return RankProfiled(ctx, dp, be, g, inputs, nil)
}

// RankProfiled is Rank reporting to sink (nil: off): each segment's launches (through
// backend.RunProfiled) and each collective step with its op, bytes, peers and mode.
func RankProfiled(ctx context.Context, dp *compiler.DistProgram, be backend.Backend, g *dtensor.Groups, inputs map[string]*tensor.Tensor, sink profile.Sink) ([]*tensor.Tensor, error) {
	if !meshMatches(dp, g) {
		return nil, errs.New(errs.Input, "program %s is for mesh %s, the communicators for %s", dp.Graph.Name, dp.Graph.Mesh, g.Mesh)
	}
	if err := graph.CheckInputs(dp.Graph, inputs); err != nil {
		return nil, errs.Wrap(errs.Input, err, "rank %d", g.Rank())
	}
	env := make(map[string]*tensor.Tensor, len(inputs))
	for k, v := range inputs {
		env[k] = v
	}
	for _, st := range dp.Steps {
		if st.Bucket != nil {
			xs := make([]*tensor.Tensor, len(st.Bucket))
			for i, n := range st.Bucket {
				xs[i] = env[n.Inputs[0].Name]
			}
			t0, w0 := time.Now(), commOf(g, st.Bucket[0]).Waited()
			outs, err := dtensor.ExecBucket(ctx, g, st.Bucket, xs)
			if err != nil {
				return nil, err
			}
			if sink != nil {
				var n int64
				for _, x := range xs {
					n += int64(len(x.Data))
				}
				sink.Collective(collectiveOf(g, st.Bucket[0], " (bucket)", n, t0, w0))
			}
			for i, n := range st.Bucket {
				env[n.Output.Name] = outs[i]
			}
			continue
		}
		if st.Node != nil {
			var x *tensor.Tensor
			if len(st.Node.Inputs) > 0 {
				x = env[st.Node.Inputs[0].Name]
			}
			t0, w0 := time.Now(), commOf(g, st.Node).Waited()
			out, err := dtensor.Exec(ctx, g, st.Node, x)
			if err != nil {
				return nil, err
			}
			if sink != nil {
				var n int64
				if x != nil {
					n = int64(len(x.Data))
				}
				sink.Collective(collectiveOf(g, st.Node, "", n, t0, w0))
			}
			env[st.Node.Output.Name] = out
			continue
		}
		seg := st.Program.Graph
		ins := make(map[string]*tensor.Tensor, len(seg.Inputs))
		for _, v := range seg.Inputs {
			ins[v.Name] = env[v.Name]
		}
		var outs []*tensor.Tensor
		var err error
		if sink != nil {
			outs, err = backend.RunProfiled(be, st.Program, ins, sink)
		} else {
			outs, err = be.Run(st.Program, ins)
		}
		if err != nil {
			return nil, errs.Wrap(errs.Internal, err, "rank %d: segment %s", g.Rank(), seg.Name)
		}
		for i, v := range seg.Outputs {
			env[v.Name] = outs[i]
		}
	}
	res := make([]*tensor.Tensor, len(dp.Graph.Outputs))
	for i, v := range dp.Graph.Outputs {
		res[i] = env[v.Name].Clone()
	}
	return res, nil
}

// collectiveOf is the profile record of collective node n over its axis's group.
func collectiveOf(g *dtensor.Groups, n *graph.Node, suffix string, bytes int64, start time.Time, waited time.Duration) profile.Collective {
	c := commOf(g, n)
	op := n.Op + suffix
	if ax := n.StringAttr("axis"); ax != "" {
		op += " over " + ax
	}
	return profile.Collective{Op: op, Bytes: bytes, Peers: c.World() - 1, Mode: c.Mode().String(), Start: start, Dur: time.Since(start),
		Wait: c.Waited() - waited}
}

// commOf is the communicator collective node n runs on: its axis's, else the world's.
func commOf(g *dtensor.Groups, n *graph.Node) *dist.Comm {
	if ax := n.StringAttr("axis"); ax != "" {
		if a, err := g.Axis(ax); err == nil {
			return a
		}
	}
	return g.World
}

func meshMatches(dp *compiler.DistProgram, g *dtensor.Groups) bool {
	a, b := dp.Graph.Mesh, g.Mesh
	return a != nil && b != nil && a.String() == b.String()
}

// Inproc runs dp on every rank of its mesh as goroutines over an in-process transport with
// communicators in the given mode; inputs[r] are rank r's blocks. The first failing rank's
// error is returned and cancels the others, so no rank is left waiting on a peer.
func Inproc(ctx context.Context, dp *compiler.DistProgram, be backend.Backend, opts dist.Options, inputs []map[string]*tensor.Tensor) ([][]*tensor.Tensor, error) {
	if dp.Graph.Mesh == nil {
		return nil, errs.New(errs.Input, "program %s has no mesh", dp.Graph.Name)
	}
	return Goroutines(ctx, dp, be, opts, dist.NewInproc(dp.Graph.Mesh.World()), inputs)
}

// Goroutines is Inproc over given transport endpoints (ts[r] is rank r's, any transport: tcp
// endpoints on loopback run the same program over sockets). It closes the endpoints.
func Goroutines(ctx context.Context, dp *compiler.DistProgram, be backend.Backend, opts dist.Options, ts []dist.Transport, inputs []map[string]*tensor.Tensor) ([][]*tensor.Tensor, error) {
	m := dp.Graph.Mesh
	if m == nil {
		return nil, errs.New(errs.Input, "program %s has no mesh", dp.Graph.Name)
	}
	if len(inputs) != m.World() || len(ts) != m.World() {
		return nil, errs.New(errs.Input, "program %s runs on %d ranks, got inputs for %d and %d endpoints", dp.Graph.Name, m.World(), len(inputs), len(ts))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	outs := make([][]*tensor.Tensor, m.World())
	errsOf := make([]error, m.World())
	var wg sync.WaitGroup
	for r := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ts[r].Close()
			g, err := dtensor.NewGroups(m, dist.NewComm(ts[r], opts))
			if err == nil {
				outs[r], err = Rank(ctx, dp, be, g, inputs[r])
			}
			if err != nil {
				errsOf[r] = err
				cancel()
			}
		}()
	}
	wg.Wait()
	// The root cause is the first error that is not another rank's cancellation.
	var first error
	for _, err := range errsOf {
		if err != nil && (first == nil || (errs.CodeOf(first) == errs.TimeoutComm && errs.CodeOf(err) != errs.TimeoutComm)) {
			first = err
		}
	}
	if first != nil {
		return nil, first
	}
	return outs, nil
}

// ShardInputs cuts whole input tensors (by name) into every rank's blocks per the plan.
func ShardInputs(plan *compiler.DistPlan, global map[string]*tensor.Tensor) ([]map[string]*tensor.Tensor, error) {
	m := plan.Mesh
	out := make([]map[string]*tensor.Tensor, m.World())
	for r := range out {
		out[r] = map[string]*tensor.Tensor{}
		for _, p := range plan.Inputs {
			t, ok := global[p.Name]
			if !ok {
				return nil, errs.New(errs.Input, "missing input %%%s (%s)", p.Name, p.Global)
			}
			b, err := dtensor.Shard(m, p.Name, p.Layout, t, r)
			if err != nil {
				return nil, err
			}
			out[r][p.Name] = b
		}
	}
	return out, nil
}

// AssembleOutputs rebuilds each whole output from every rank's blocks (outs[r][i]), checking
// that replicas agree bit for bit (dtensor.Assemble).
func AssembleOutputs(plan *compiler.DistPlan, outs [][]*tensor.Tensor) ([]*tensor.Tensor, error) {
	res := make([]*tensor.Tensor, len(plan.Outputs))
	for i, p := range plan.Outputs {
		blocks := make([]*tensor.Tensor, len(outs))
		for r := range outs {
			blocks[r] = outs[r][i]
		}
		var err error
		if res[i], err = dtensor.Assemble(plan.Mesh, p.Name, p.Layout, blocks); err != nil {
			return nil, err
		}
	}
	return res, nil
}
