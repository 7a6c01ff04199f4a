package mesh

import (
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Move is one step between layouts: a collective (all_reduce, all_to_all, all_gather) or the
// local chunk, over Axis. Dim is the dim it gathers, chunks or (all_to_all) joins; ToDim is
// the dim all_to_all splits, where the shard moves to.
type Move struct {
	Op    string
	Axis  string
	Dim   int
	ToDim int
	After Layout // the layout once the move is done
}

// Moves plans the way from one layout to another of the same rank: pending sums that `to`
// does not keep are all-reduced first; a shard that `to` puts on another (free) dim moves
// there with one all_to_all; other shards that differ are all-gathered; dims `to` shards
// that are then whole are chunked locally (no communication). `to` cannot add a pending sum.
// The compiler's shard pass and DTensor.Redistribute both follow this plan.
func Moves(from, to Layout) ([]Move, error) {
	if from.Rank() != to.Rank() {
		return nil, errs.New(errs.Shape, "layout %s has rank %d, target %s rank %d", from, from.Rank(), to, to.Rank())
	}
	for _, a := range to.Partial {
		if !from.IsPartial(a) {
			return nil, errs.New(errs.Input, "layout %s cannot become %s: a pending sum over %s cannot be created", from, to, a)
		}
	}
	var out []Move
	l := from.Clone()
	for _, a := range from.Partial {
		if !to.IsPartial(a) {
			l.Partial = slices.DeleteFunc(l.Partial, func(p string) bool { return p == a })
			out = append(out, Move{Op: "all_reduce", Axis: a, After: l.Clone()})
		}
	}
	for i, a := range l.Dims {
		if a == "" || a == to.Dims[i] {
			continue
		}
		if j := to.ShardedDim(a); j >= 0 && l.Dims[j] == "" {
			l.Dims[i], l.Dims[j] = "", a
			out = append(out, Move{Op: "all_to_all", Axis: a, Dim: i, ToDim: j, After: l.Clone()})
		} else {
			l.Dims[i] = ""
			out = append(out, Move{Op: "all_gather", Axis: a, Dim: i, After: l.Clone()})
		}
	}
	for i, a := range to.Dims {
		if a != "" && l.Dims[i] == "" {
			l.Dims[i] = a
			out = append(out, Move{Op: "chunk", Axis: a, Dim: i, After: l.Clone()})
		}
	}
	if !l.Equal(to) {
		return nil, errs.New(errs.Internal, "moves from %s end at %s, not %s", from, l, to)
	}
	return out, nil
}
