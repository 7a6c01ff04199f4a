package compiler

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// CompileLog is what the driver records when Options.Profile is set: the time of every pass
// and the fusion trace (which rewrite changed which nodes), so a profile can say why a kernel
// exists.
type CompileLog struct {
	Passes   []PassTime
	Rewrites []Rewrite
}

// PassTime is one pass's wall time.
type PassTime struct {
	Name string
	Dur  time.Duration
}

// Rewrite is one change a pass made. Kind is "removed" (a node left the graph), "added" (a
// node appeared), "op" (a node's op changed, e.g. matmul -> attention) or "fused" (nodes
// grouped into one kernel by fuse-elementwise). Nodes are output names ("%h=matmul").
type Rewrite struct {
	Pass  string
	Kind  string
	Nodes []string
}

func (r Rewrite) String() string {
	return fmt.Sprintf("%s %s %s", r.Pass, r.Kind, strings.Join(r.Nodes, " "))
}

// nodeSig is a node as the fusion trace compares it: its output name and op.
type nodeSig struct{ name, op string }

func nodeSigs(g *graph.Graph) []nodeSig {
	if g == nil {
		return nil
	}
	out := make([]nodeSig, len(g.Nodes))
	for i, n := range g.Nodes {
		out[i] = nodeSig{n.Output.Name, n.Op}
	}
	return out
}

// rewritesOf diffs the graph before and after a pass (the driver does it, not the passes), and
// reads the groups fuse-elementwise formed.
func rewritesOf(ps pass, before []nodeSig, s *state) []Rewrite {
	if ps.name == "fuse-elementwise" {
		var out []Rewrite
		for _, gr := range s.groups {
			if len(gr.nodes) < 2 {
				continue
			}
			var names []string
			for _, n := range gr.nodes {
				names = append(names, "%"+n.Output.Name+"="+n.Op)
			}
			out = append(out, Rewrite{Pass: ps.name, Kind: "fused", Nodes: names})
		}
		return out
	}
	after := nodeSigs(s.g)
	opOf := func(sigs []nodeSig) map[string]string {
		m := map[string]string{}
		for _, n := range sigs {
			m[n.name] = n.op
		}
		return m
	}
	was, now := opOf(before), opOf(after)
	var removed, added, changed []string
	for _, n := range before {
		if op, ok := now[n.name]; !ok {
			removed = append(removed, "%"+n.name+"="+n.op)
		} else if op != n.op {
			changed = append(changed, "%"+n.name+"="+n.op+"->"+op)
		}
	}
	for _, n := range after {
		if _, ok := was[n.name]; !ok {
			added = append(added, "%"+n.name+"="+n.op)
		}
	}
	var out []Rewrite
	for _, r := range []Rewrite{{ps.name, "op", changed}, {ps.name, "removed", removed}, {ps.name, "added", added}} {
		if len(r.Nodes) > 0 {
			r.Nodes = slices.Clip(r.Nodes)
			out = append(out, r)
		}
	}
	return out
}
