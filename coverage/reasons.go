package coverage

import (
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// Reason states why a cell is intentionally empty. Op is an op name, or "kind:KIND" for every
// op of a kind (kind names as `tessera-qa ops` prints them). Adding an op that a check does
// not cover is one line here.
type Reason struct{ Op, Check, Why string }

// Reasons is the one table of intentionally empty cells.
var Reasons = []Reason{
	// Collectives run in engine/dist between compiled segments; they are checked by
	// collectives/, golden's dist catalogue and differential/collective.
	{"kind:collective", GoldenCases, "no bool case in the dist catalogue: bool moves as bytes, which its i8 cases cover"},
	{"kind:collective", DiffJAX, "no JAX process groups on the CPU machines; torch's gloo is the collective oracle"},
	{"kind:collective", Property, "the random-graph generator builds one-device graphs; collectives/ sweeps ops, dtypes, sizes and worlds"},
	{"kind:collective", Shard, "the shard pass inserts collectives itself and refuses a source graph that holds one"},
	{"kind:collective", CPU, "a collective is a step of the dist runtime (engine/dist), not a Tile IR kernel"},
	{"kind:collective", PTX, "a collective is a step of the dist runtime (engine/dist), not a PTX kernel"},
	{"kind:collective", Bench, "`tessera-qa collectives` measures bus bandwidth per op (collectives/), not bench"},
	{"send", DiffTorch, "point-to-point pairs have no gloo row: golden's dist catalogue checks send/recv against ref.RunDist"},
	{"recv", DiffTorch, "point-to-point pairs have no gloo row: golden's dist catalogue checks send/recv against ref.RunDist"},
	{"chunk", DiffTorch, "chunk moves no data between ranks (each keeps its block): nothing for gloo to compare"},

	// Benchmarks: bench compares the engine's speed with torch's on the shapes that matter;
	// one lone elementwise op is memory-bound like the copy and elementwise rows.
	{"kind:unary", Bench, "memory-bound like the copy row; the elementwise row times a fused chain (mul, add, gelu)"},
	{"sub", Bench, "memory-bound like the elementwise row's add and mul"},
	{"div", Bench, "memory-bound like the elementwise row's add and mul"},
	{"maximum", Bench, "memory-bound like the elementwise row's add and mul"},
	{"minimum", Bench, "memory-bound like the elementwise row's add and mul"},
	{"reduce_mean", Bench, "the reduce_sum rows time the same reduction (a mean is one more multiply)"},
	{"slice", Bench, "a strided copy: the copy and transpose rows bound it"},
	{"concat", Bench, "a strided copy: the copy and transpose rows bound it"},
	{"mse_loss", Bench, "a training loss: `bench --train` times it inside the training step"},
	{"attention_grad", Bench, "the backward of attention: `bench --train` times it inside the training step"},
	{"attention_lse", Bench, "a by-product of the attention forward used by its backward; no torch counterpart to time alone"},

	// Shard rules.
	{"scaled_matmul", Shard, "its b is [N,K] with two scale operands: no sharding rule yet (engine/compiler/shard.go)"},
	{"kind:attention_grad", Shard, "the attention backward is sharded with the training step (gradients/mesh.go), not by a one-op rule"},

	// Spectral ops (issue 26): the CPU backend runs them through a Tile IR FFT instruction.
	{"kind:complex", Shard, "desugared before the shard pass (the 2-D FFTs into two one-axis FFTs, complex_mul and conj into slices, elementwise ops and a concat), whose rules shard them (sharded.Rules: fft2, irfft2; the pencil specs)"},
	{"kind:spectral", Bench, "the fft_c2c and fft_r2c rows time the forward one-axis FFTs against torch.fft; the inverses run the same tile FFT instruction; on the CPU spectral's BenchmarkFFTvsNumpy times fft against numpy.fft"},
	{"kind:complex", Bench, "desugared into one-axis FFTs (the fft_c2c and fft_r2c rows) or elementwise ops; on the CPU spectral's BenchmarkFFTvsNumpy times fft against numpy.fft"},

	// Convolutions (issue 26): the CPU backend runs them directly through Tile IR MMAs.
	{"conv1d", Bench, "the conv2d row times the same lowering (conv1d is conv2d with a 1-row kernel); on the CPU rewrite's BenchmarkConvFFTCost times direct against the FFT form"},
}

// reasonFor finds the stated reason for (d, check): the op's own line first, then its kind's.
func reasonFor(rs []Reason, d *graph.OpDef, check string) (string, bool) {
	for _, key := range []string{d.Name, "kind:" + kindName(d.Kind)} {
		for _, r := range rs {
			if r.Op == key && r.Check == check {
				return r.Why, true
			}
		}
	}
	return "", false
}

// StaleReasons lists reasons that explain nothing: an op or kind not in the registry, a
// check not in Checks, or a cell the check now covers (delete the line).
func StaleReasons(src Sources, rows []Row) []string {
	ops, kinds := map[string]bool{}, map[string]bool{}
	for _, d := range src.Ops {
		ops[d.Name], kinds[kindName(d.Kind)] = true, true
	}
	used := map[[2]string]bool{}
	for i, d := range src.Ops {
		for _, c := range rows[i].Cells {
			if c.State == Stated {
				for _, key := range []string{d.Name, "kind:" + kindName(d.Kind)} {
					if _, ok := reasonFor(onlyKey(src.Reasons, key), d, c.Check); ok {
						used[[2]string{key, c.Check}] = true
						break
					}
				}
			}
		}
	}
	var out []string
	for _, r := range src.Reasons {
		k, isKind := strings.CutPrefix(r.Op, "kind:")
		switch {
		case isKind && !kinds[k], !isKind && !ops[r.Op]:
			out = append(out, r.Op+" x "+r.Check+": no such op or kind in the registry")
		case !isCheck(r.Check):
			out = append(out, r.Op+" x "+r.Check+": no such check")
		case !used[[2]string{r.Op, r.Check}]:
			out = append(out, r.Op+" x "+r.Check+": the cell is covered now (or another line explains it): delete this line")
		}
	}
	return out
}

func onlyKey(rs []Reason, key string) []Reason {
	var out []Reason
	for _, r := range rs {
		if r.Op == key {
			out = append(out, r)
		}
	}
	return out
}

func isCheck(c string) bool {
	for _, x := range Checks {
		if x == c {
			return true
		}
	}
	return false
}
