package cuda

import (
	"github.com/tessera-qa/tessera-qa/engine/compiler"
)

// retileBySMs is the planted fault failpoint.CUDAReduceTileFromSMs: it recompiles p with every
// reduction's tile width capped at the largest power of two not above the context's SM count
// (132 SMs: 128, a 64-SM partition: 64, 32 SMs: 32), so partial sums group differently per
// partition size. Programs it cannot recompile run unchanged.
func (b *Backend) retileBySMs(p *compiler.Program) *compiler.Program {
	if p == nil || p.Graph == nil {
		return p
	}
	w := 1
	for w*2 <= b.info.SMs {
		w *= 2
	}
	cfg := map[string]compiler.Schedule{}
	for _, s := range p.Schedules {
		if s.Kind == "reduce" && s.BN > w {
			s.BN = w
			cfg[s.Key] = s
		}
	}
	if len(cfg) == 0 {
		return p
	}
	q, err := compiler.Compile(p.Graph, compiler.Options{Configs: cfg})
	if err != nil {
		return p
	}
	return q
}
