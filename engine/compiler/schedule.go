package compiler

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/failpoint"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// Schedule is the Schedule IR of one kernel: how its iteration space is cut into tiles and in
// what order tiles and loops run. It depends only on the graph (and explicit hints or autotune
// configs), never on the machine, so the same graph gets the same schedule everywhere.
type Schedule struct {
	Kernel    string // kernel name in the program (k0, k1, ...)
	Key       string // op, dtypes and shapes: what autotune configs are keyed by
	Kind      string // elementwise, reduce, rowwise, matmul, attention, copy, loss
	BM        int    // rows per tile (matmul/attention: M tile; reduce/rowwise: rows per tile)
	BN        int    // cols per tile (matmul: N tile; attention: keys per step; elementwise: block)
	BK        int    // reduction step (matmul K tile); 0 where there is none
	Stages    int    // software pipeline depth a GPU lowering may use; the CPU ignores it
	LoopOrder string // grid dims, then the sequential loop(s) inside a tile program
	Source    string // default | hint | autotune
}

func (s Schedule) String() string {
	return fmt.Sprintf("%s %s key=%s tile=[%d,%d,%d] stages=%d order=%q source=%s",
		s.Kernel, s.Kind, s.Key, s.BM, s.BN, s.BK, s.Stages, s.LoopOrder, s.Source)
}

// FormatSchedules prints one schedule per line: the --dump=schedule view.
func FormatSchedules(ss []Schedule) string {
	var b strings.Builder
	for _, s := range ss {
		b.WriteString(s.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// HashSchedules identifies a list of schedules.
func HashSchedules(ss []Schedule) string {
	h := sha256.Sum256([]byte(FormatSchedules(ss)))
	return hex.EncodeToString(h[:8])
}

// fit shrinks a default tile edge to the smallest power of two covering dim, so tiny dims do
// not get huge mostly-masked tiles; it depends only on dim, so it is deterministic.
func fit(dim, tile int) int {
	p := 1
	for p < dim && p < tile {
		p *= 2
	}
	return p
}

// Defaults, chosen for the CPU backend's micro-kernel and GPU shared-memory budgets alike.
const (
	defMatmulBM, defMatmulBN, defMatmulBK = 64, 64, 32
	defAttnBM, defAttnBN                  = 64, 64
	defElemBlock                          = 1024
	defReduceRows, defReduceCols          = 16, 256
	defRowRows, defRowCols                = 8, 256
	defLossCols                           = 1024
)

func schedule(s *state) error {
	for i, gr := range s.groups {
		gr.name = fmt.Sprintf("k%d", i)
		sc := defaultSchedule(gr)
		sc.Kernel = gr.name
		sc.Source = "default"
		if n := gr.root(); n.Def().Kind == graph.KindMatmul {
			if t := n.IntsAttr("tile"); t != nil {
				sc.BM, sc.BN, sc.BK, sc.Source = t[0], t[1], t[2], "hint"
			}
		}
		if c, ok := s.opts.Configs[sc.Key]; ok {
			if c.BM < 1 || c.BN < 1 || (sc.BK > 0 && c.BK < 1) {
				return fmt.Errorf("autotune config for %s has a non-positive tile %v", sc.Key, [3]int{c.BM, c.BN, c.BK})
			}
			sc.BM, sc.BN, sc.BK, sc.Stages, sc.Source = c.BM, c.BN, c.BK, max(c.Stages, 1), "autotune"
		}
		gr.sched = sc
	}
	return nil
}

func schedulesOf(gs []*group) []Schedule {
	out := make([]Schedule, len(gs))
	for i, g := range gs {
		out[i] = g.sched
	}
	return out
}

func defaultSchedule(gr *group) Schedule {
	n := gr.root()
	in := n.Inputs
	key := gr.key()
	switch n.Def().Kind {
	case graph.KindMatmul:
		_, m, nn, k, _ := graph.MatmulDims(n, in[0].Type, in[1].Type)
		return Schedule{Key: key, Kind: "matmul", BM: fit(m, defMatmulBM), BN: fit(nn, defMatmulBN), BK: fit(k, defMatmulBK),
			Stages: 2, LoopOrder: "grid(batch,m,n) k-seq"}
	case graph.KindAttention:
		r := in[0].Type.Rank()
		sq, sk := in[0].Type.Shape[r-2], in[1].Type.Shape[r-2]
		bm, bn := attnTiles(fit(sq, defAttnBM), fit(sk, defAttnBN), in, true, attnLive)
		return Schedule{Key: key, Kind: "attention", BM: bm, BN: bn, Stages: 2,
			LoopOrder: "grid(batch,q) keys-seq online-softmax"}
	case graph.KindAttentionGrad:
		// The backward keeps about fifteen tiles live per grid point (S, P, dP, dS and the
		// operands), so its tiles are half the forward's: on the GPU's SIMT path they sit in
		// shared memory.
		r := in[0].Type.Rank()
		sq, sk := in[0].Type.Shape[r-2], in[1].Type.Shape[r-2]
		bm, bn := attnTiles(fit(sq, defAttnBM/2), fit(sk, defAttnBN/2), in, false, attnGradLive)
		return Schedule{Key: key, Kind: "attention_grad", BM: bm, BN: bn, Stages: 1,
			LoopOrder: "grid(batch,q|k) k|q-seq recompute P from lse"}
	case graph.KindReduce:
		outer, inner := reduceExtent(n)
		return Schedule{Key: key, Kind: "reduce", BM: fit(outer, defReduceRows), BN: failpoint.Apply(failpoint.ScheduleReduceTileFromCores, fit(inner, defReduceCols), func(bn int) int { return max(bn/runtime.GOMAXPROCS(0), 1) }), Stages: 1,
			LoopOrder: "grid(rows) cols-seq"}
	case graph.KindRowwise:
		outer, inner := rowExtent(n)
		return Schedule{Key: key, Kind: "rowwise", BM: fit(outer, defRowRows), BN: fit(inner, defRowCols), Stages: 1,
			LoopOrder: "grid(rows) cols-seq"}
	case graph.KindLoss:
		return Schedule{Key: key, Kind: "loss", BM: 1, BN: fit(in[0].Type.NumElems(), defLossCols), Stages: 1,
			LoopOrder: "grid(1) cols-seq"}
	case graph.KindSpectral:
		return fftSchedule(n, key)
	case graph.KindConv:
		return convSchedule(n, key)
	case graph.KindMovement:
		return Schedule{Key: key, Kind: "copy", BM: 1, BN: fit(n.Output.Type.NumElems(), defElemBlock), Stages: 1,
			LoopOrder: "grid(blocks)"}
	}
	return Schedule{Key: key, Kind: "elementwise", BM: 1, BN: fit(n.Output.Type.NumElems(), defElemBlock), Stages: 1,
		LoopOrder: "grid(blocks)"}
}
