package collectives

import (
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Op is a collective the checks exercise, named as nccl-tests and torch.distributed name it.
type Op string

const (
	AllReduce     Op = "all_reduce"
	AllGather     Op = "all_gather"
	ReduceScatter Op = "reduce_scatter"
	Broadcast     Op = "broadcast"
	AllToAll      Op = "all_to_all"
)

// Ops lists every op in the order the tables print them.
var Ops = []Op{AllReduce, AllGather, ReduceScatter, Broadcast, AllToAll}

// Reduces reports whether the op takes a reduction operator.
func (o Op) Reduces() bool { return o == AllReduce || o == ReduceScatter }

// Rooted reports whether the op has a root rank.
func (o Op) Rooted() bool { return o == Broadcast }

// Splits reports whether the op divides its buffer into one chunk per rank (nccl-tests
// rounds such counts down to a multiple of the world size).
func (o Op) Splits() bool { return o == AllGather || o == ReduceScatter || o == AllToAll }

func (o Op) valid() bool {
	for _, x := range Ops {
		if x == o {
			return true
		}
	}
	return false
}

// ParseOps reads op names (comma-separated lists allowed); "all" selects every op. An empty
// list selects every op.
func ParseOps(names []string) ([]Op, error) {
	names = splitList(names)
	if len(names) == 0 {
		return Ops, nil
	}
	var out []Op
	for _, n := range names {
		if n == "all" {
			return Ops, nil
		}
		o := Op(n)
		if !o.valid() {
			return nil, errs.New(errs.Input, "unknown collective %q (want all_reduce, all_gather, reduce_scatter, broadcast, all_to_all or all)", n)
		}
		out = appendNew(out, o)
	}
	return out, nil
}

// RedOps lists every reduction operator.
var RedOps = []dist.RedOp{dist.Sum, dist.Max, dist.Min, dist.Avg}

// ParseRedOps reads reduction names; "all" selects sum, max, min and avg; empty means sum
// (nccl-tests' default).
func ParseRedOps(names []string) ([]dist.RedOp, error) {
	names = splitList(names)
	if len(names) == 0 {
		return []dist.RedOp{dist.Sum}, nil
	}
	var out []dist.RedOp
	for _, n := range names {
		if n == "all" {
			return RedOps, nil
		}
		r, err := dist.ParseRedOp(n)
		if err != nil {
			return nil, err
		}
		out = appendNew(out, r)
	}
	return out, nil
}

// BusFactor is nccl-tests' correction from algorithm to bus bandwidth for op on n ranks
// (nccl-tests doc/PERFORMANCE.md): all_reduce 2(n-1)/n; all_gather, reduce_scatter and
// all_to_all (n-1)/n; broadcast 1. It makes busbw comparable with the hardware's link
// bandwidth whatever the world size.
func BusFactor(op Op, n int) float64 {
	if n < 1 {
		return 0
	}
	f := float64(n-1) / float64(n)
	switch op {
	case AllReduce:
		return 2 * f
	case Broadcast:
		return 1
	}
	return f
}

// Bandwidth turns one operation's size (nccl-tests' "size": the bytes of the op's whole
// buffer, see Case.Bytes) and its time into algbw = bytes/time and busbw = algbw *
// BusFactor, both in GB/s (1e9 bytes per second). A time of zero gives zeros. The gloo side
// of --vs gloo goes through the same function, so the two columns are comparable.
func Bandwidth(op Op, n int, bytes int64, seconds float64) (algbw, busbw float64) {
	if seconds <= 0 {
		return 0, 0
	}
	algbw = float64(bytes) / seconds / 1e9
	return algbw, algbw * BusFactor(op, n)
}

// splitList splits comma-separated entries and drops empty ones.
func splitList(in []string) []string {
	var out []string
	for _, s := range in {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func appendNew[T comparable](s []T, v T) []T {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}
