package ptx

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/compiler"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// TestWriteAttnBundle writes timing cases of the dedicated attention kernel's variants (and
// diagnostic cuts of it, which compute the wrong thing on purpose: no exp, no softmax, no
// loads, no P V) to $TESSERA_PTX_ATTN_BUNDLE for testdata/gemmbench.py bench, which times
// each against torch's scaled_dot_product_attention in one process. Skips without it.
func TestWriteAttnBundle(t *testing.T) {
	dir := os.Getenv("TESSERA_PTX_ATTN_BUNDLE")
	if dir == "" {
		t.Skip("TESSERA_PTX_ATTN_BUNDLE not set: nothing to write")
	}
	if err := os.MkdirAll(filepath.Join(dir, "ptx"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfgs := []attnCfg{{stages: 2, ws: true}, {stages: 2}, {stages: 3}, {stages: 2, late: true}, {stages: 3, late: true}}
	for _, d := range []string{"noexp", "nosoftmax", "noloads", "noloads,nosoftmax", "nopv"} {
		cfgs = append(cfgs, attnCfg{stages: 2, late: true, diag: d})
	}
	var bench []gemmBenchCase
	for gi, causal := range []bool{false, true} {
		a := attnShape{64, 4096, 4096, 128, 128, causal}
		g := attnGraph(t, numerics.BF16, a, nil)
		// torch wants [B, H, S, D]: the same bytes as [B*H, S, D].
		p, err := compiler.Compile(g, compiler.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s, ok := matchAttention(p.Kernels[0])
		if !ok {
			t.Fatal("not matched")
		}
		flops := 4 * float64(a.bh) * float64(a.sq) * float64(a.sk) * float64(a.d)
		if causal {
			flops /= 2
		}
		for _, c := range cfgs {
			if !c.valid(s) {
				continue
			}
			m := attnKernel(s, c, sm90a, "tq_k0", len(p.Kernels[0].Params))
			name := fmt.Sprintf("attn-causal=%v-%s", causal, c)
			bc := gemmBenchCase{Group: fmt.Sprint(gi + 1), Tile: m.Tile, benchCase: benchCase{Name: name,
				Torch: fmt.Sprintf("torch.nn.functional.scaled_dot_product_attention(a.view(4,16,4096,128), b.view(4,16,4096,128), c.view(4,16,4096,128), is_causal=%v).view(64,4096,128)", map[bool]string{false: "False", true: "True"}[causal]),
				Flops: flops, Inputs: p.Inputs, Buffers: buffersOf(p),
				Kernels: []bundleKernel{writeKernel(t, dir, sanitize(name)+".ptx", m, paramBuffers(p))}}}
			for _, v := range p.Graph.Inputs {
				bc.Shapes = append(bc.Shapes, v.Type.Shape)
			}
			bench = append(bench, bc)
		}
	}
	writeJSON(t, filepath.Join(dir, "bench.json"), bench)
}

func sanitize(s string) string {
	out := []byte(s)
	for i, c := range out {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			out[i] = '_'
		}
	}
	return string(out)
}
