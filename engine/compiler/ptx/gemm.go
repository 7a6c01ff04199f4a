package ptx

import (
	"os"

	"github.com/tessera-qa/tessera-qa/engine/compiler/tile"
)

// dedicated returns the dedicated kernel for k when it is the canonical matmul (matchGemm) and
// the target has tensor cores to spare the general path: wgmma on sm_90a, mma.sync otherwise;
// or the canonical attention (matchAttention) on sm_90a. TESSERA_PTX_GEMM=off and
// TESSERA_PTX_ATTN=off keep them on the general path (to compare the two on a GPU);
// TESSERA_PTX_FP8_SETS=1 gives the fp8 kernel one promotion set instead of two, and =0 none
// (fast accumulation, 128x256 tiles: a measurement of what promotion costs, not the op's
// f32-accumulation contract).
func dedicated(k *tile.Kernel, t Target) (*Module, bool) {
	if t.SIMTOnly {
		return nil, false
	}
	if s, ok := matchAttention(k); ok && t.SM == 90 && t.ArchSuffix == "a" && os.Getenv("TESSERA_PTX_ATTN") != "off" {
		if c := defaultAttnCfg(s); c.valid(s) {
			return attnKernel(s, c, t, entryName(k.Name), len(k.Params)), true
		}
	}
	if os.Getenv("TESSERA_PTX_GEMM") == "off" {
		return nil, false
	}
	s, ok := matchGemm(k)
	if !ok {
		return nil, false
	}
	c := gemmCfgFor(s, t)
	if !c.valid() {
		return nil, false
	}
	return gemmKernel(s, c, t, entryName(k.Name), len(k.Params)), true
}

// gemmCfgFor honours the Tile IR's tile (the schedule's BM, BN, BK, which autotune varies)
// when a dedicated kernel supports it, and otherwise uses the default tiling; Module.Tile
// says which one the kernel uses.
func gemmCfgFor(s gemmSpec, t Target) gemmCfg {
	if s.scaled() {
		if t.SM == 90 && t.ArchSuffix == "a" {
			c := defaultFP8Cfg()
			switch os.Getenv("TESSERA_PTX_FP8_SETS") {
			case "1":
				// One promotion set: 64 fewer registers a thread, but the add of each k-tile
				// waits for its wgmma (to compare the two on a GPU).
				c.wait = 0
			case "0":
				// No promotion (fast accumulation: not the f32 accumulation scaled_matmul
				// promises), 128x256 tiles as the bf16 kernel's: what promotion costs.
				c.fastAccum, c.bn, c.stages = true, 256, 4
			}
			return c
		}
		return gemmCfg{} // no fp8 mma.sync kernel: the general path (an invalid config)
	}
	path := "mma.sync"
	if t.SM == 90 && t.ArchSuffix == "a" {
		path = "wgmma"
	}
	c := defaultGemmCfg(path)
	if bm, bn, bk := s.irTile[0], s.irTile[1], s.irTile[2]; bm == 128 && (bn == 128 || bn == 256) && bk == gemmBK {
		c.bn = bn
	}
	return c
}
