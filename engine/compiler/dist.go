package compiler

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// DistProgram is one rank's compiled SPMD program: the rank graph (mesh line, local shapes,
// collective nodes) cut at its collectives into steps. A segment step is an ordinary Program
// whose graph's inputs and outputs are values of Graph by name; a collective step is one node
// of Graph, run on the host between kernels (engine/dist/run). Every rank runs the same steps.
type DistProgram struct {
	Plan  *DistPlan // nil for a graph written as a rank program by hand
	Graph *graph.Graph
	Steps []Step
	// ScheduleHash covers every segment's schedules and the collective steps.
	ScheduleHash string
}

// Step is a compiled segment (Program), a collective node (Node) or a bucket of all_reduces
// (Bucket); exactly one is set. A bucket is two or more all_reduce nodes over one axis with one
// reduction and dtype that run as one collective over their inputs laid end to end, each node
// taking its slice of the result: the reduction works element by element, so every element
// gets the bits it would get alone, for one collective's latency instead of len(Bucket).
type Step struct {
	Program *Program
	Node    *graph.Node
	Bucket  []*graph.Node
}

// BucketBytes caps a bucket's inputs (PyTorch DDP's default bucket, 25 MiB).
const BucketBytes = 25 << 20

// CompileDist compiles g for Options.Mesh: the graph passes and the shard pass give the rank
// program, which is cut at its collectives; each segment between them runs the rest of the
// pipeline as its own Program. A graph that already has a mesh (a rank program written by hand,
// collectives included) compiles as it is when Options.Mesh is nil.
func CompileDist(g *graph.Graph, opts Options) (*DistProgram, error) {
	if opts.Mesh == nil && g.Mesh == nil {
		return nil, errs.New(errs.Input, "graph %s: CompileDist needs Options.Mesh or a graph with a mesh line", g.Name)
	}
	s, err := runPasses(g, opts, true)
	if err != nil {
		return nil, err
	}
	dp := &DistProgram{Plan: s.plan, Graph: s.g}
	segOpts := opts
	segOpts.Mesh, segOpts.Layouts = nil, nil
	segOpts.DumpAfter = slices.DeleteFunc(slices.Clone(opts.DumpAfter), func(name string) bool {
		i := slices.IndexFunc(passes[:], func(p pass) bool { return p.name == name })
		return i >= 0 && (passes[i].level == "graph" || passes[i].level == "dist")
	})
	if len(segOpts.DumpAfter) == 0 {
		segOpts.Dump = nil
	}
	h := sha256.New()
	sinkOutputCollectives(s.g)
	for i, st := range bucket(split(s.g)) {
		if st.Node != nil {
			dp.Steps = append(dp.Steps, st)
			fmt.Fprintf(h, "step %d: %s\n", i, nodeText(st.Node))
			continue
		}
		if st.Bucket != nil {
			dp.Steps = append(dp.Steps, st)
			for _, n := range st.Bucket {
				fmt.Fprintf(h, "step %d: bucket %s\n", i, nodeText(n))
			}
			continue
		}
		p, err := Compile(st.Program.Graph, segOpts)
		if err != nil {
			return nil, errs.Wrap(errs.Internal, err, "segment %s of %s", st.Program.Graph.Name, g.Name)
		}
		dp.Steps = append(dp.Steps, Step{Program: p})
		fmt.Fprintf(h, "step %d: %s\n", i, p.ScheduleHash)
	}
	dp.ScheduleHash = hex.EncodeToString(h.Sum(nil))[:16]
	return dp, nil
}

func nodeText(n *graph.Node) string {
	s := n.Op
	for _, k := range n.Attrs.Names() {
		s += " " + k + "=" + graph.FormatAttr(n.Attrs[k])
	}
	return s + " " + n.Output.Type.String()
}

// sinkOutputCollectives moves every all_reduce whose result only leaves the program (read by
// no node: a weight gradient's sum over dp, the loss's average) to the end of g, keeping their
// order: nothing waits for them, and at the end they stand together, where bucket joins them.
// The nodes stay in a topological order, and every rank moves the same ones.
func sinkOutputCollectives(g *graph.Graph) {
	read := map[*graph.Value]bool{}
	for _, n := range g.Nodes {
		for _, v := range n.Inputs {
			read[v] = true
		}
	}
	var keep, sunk []*graph.Node
	for _, n := range g.Nodes {
		if n.Op == "all_reduce" && !read[n.Output] {
			sunk = append(sunk, n)
		} else {
			keep = append(keep, n)
		}
	}
	g.Nodes = append(keep, sunk...)
}

// bucket joins runs of consecutive all_reduce steps over one axis, reduction and dtype, none
// reading another's result, into buckets of at most BucketBytes of input.
func bucket(steps []Step) []Step {
	var out []Step
	for _, st := range steps {
		if n := len(out); n > 0 && st.Node != nil {
			run := out[n-1].Bucket
			if out[n-1].Node != nil {
				run = []*graph.Node{out[n-1].Node}
			}
			if joins(run, st.Node) {
				out[n-1] = Step{Bucket: append(slices.Clip(run), st.Node)}
				continue
			}
		}
		out = append(out, st)
	}
	return out
}

// joins says whether all_reduce n can join the run of collectives that directly precedes it.
func joins(run []*graph.Node, n *graph.Node) bool {
	if len(run) == 0 || n.Op != "all_reduce" {
		return false
	}
	bytes := func(m *graph.Node) int { return m.Output.Type.NumElems() * m.Output.Type.DType.Size() }
	size := bytes(n)
	for _, m := range run {
		if m.Op != "all_reduce" || m.StringAttr("axis") != n.StringAttr("axis") || m.StringAttr("op") != n.StringAttr("op") ||
			m.Output.Type.DType != n.Output.Type.DType || n.Inputs[0] == m.Output {
			return false
		}
		size += bytes(m)
	}
	return size <= BucketBytes
}

// split cuts g at its collective nodes. A segment is returned as a Step whose Program holds
// only its (uncompiled) Graph: the nodes between two collectives, reading values defined
// before it as inputs and exporting the values that later steps or g's outputs read.
func split(g *graph.Graph) []Step {
	var steps []Step
	var run []*graph.Node
	used := map[*graph.Value]int{} // last step index reading each value; outputs read at the end
	order := map[*graph.Node]int{}
	for i, n := range g.Nodes {
		order[n] = i
		for _, v := range n.Inputs {
			used[v] = i
		}
	}
	for _, v := range g.Outputs {
		used[v] = len(g.Nodes)
	}
	flush := func() {
		if len(run) == 0 {
			return
		}
		last := order[run[len(run)-1]]
		seg := &graph.Graph{Name: fmt.Sprintf("%s_seg%d", g.Name, len(steps))}
		vm := map[*graph.Value]*graph.Value{}
		cv := func(v *graph.Value) *graph.Value {
			if c, ok := vm[v]; ok {
				return c
			}
			c := &graph.Value{Name: v.Name, Type: graph.Type{DType: v.Type.DType, Shape: slices.Clone(v.Type.Shape)}}
			vm[v] = c
			return c
		}
		inside := map[*graph.Value]bool{}
		for _, n := range run {
			inside[n.Output] = true
		}
		for _, n := range run {
			c := &graph.Node{Op: n.Op, Attrs: n.Attrs.Clone(), Output: cv(n.Output)}
			for _, v := range n.Inputs {
				if _, seen := vm[v]; !seen && !inside[v] {
					seg.Inputs = append(seg.Inputs, cv(v))
				}
				c.Inputs = append(c.Inputs, cv(v))
			}
			seg.Nodes = append(seg.Nodes, c)
		}
		for _, n := range run {
			if used[n.Output] > last {
				seg.Outputs = append(seg.Outputs, vm[n.Output])
			}
		}
		if len(seg.Outputs) > 0 {
			steps = append(steps, Step{Program: &Program{Graph: seg}})
		}
		run = nil
	}
	for _, n := range g.Nodes {
		if graph.IsCollective(n.Op) {
			flush()
			steps = append(steps, Step{Node: n})
			continue
		}
		run = append(run, n)
	}
	flush()
	return steps
}
