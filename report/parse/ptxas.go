package parse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report/store"
)

// The ptxas suite (suites/ptxas) reports what NVIDIA's assembler makes of the generator's
// kernels as "ptxas cost" entries, one a code path and set of kernels. They become metrics of
// kind "compile" (the dashboard's Compile cost section), one section a set ("ptxas on the
// golden catalogue", "ptxas on random graphs"), four metrics a path: PTX a module, ptxas time a
// module, the most registers an entry uses, and bytes spilled. CI assembles the same kernels
// each run (the fixed seed draws the same random graphs), so a change in the PTX a module or
// the registers is the generator's doing; the time also moves with the machine.
const CompileMetric = "compile"

const ptxasEntry = "ptxas cost"

type ptxasValue struct {
	Set     *string  `json:"set"`
	Path    *string  `json:"path"`
	Modules int      `json:"modules"`
	PTXKB   *float64 `json:"ptx_kb"`
	MS      float64  `json:"ms"`
	MaxRegs int      `json:"max_regs"`
	Spilled int      `json:"spilled"`
	Release string   `json:"ptxas"`
}

// ptxasEntries appends the metrics of one spec's "ptxas cost" entries to p; a path that
// spills fails its spill metric whatever the spec said.
func ptxasEntries(c *Checker, where, state string, entries []ginkgoEntry, p *Report) {
	verdict := specVerdict(state)
	for i, e := range entries {
		raw := bytes.TrimSpace([]byte(e.Value.AsJSON))
		if e.Name != ptxasEntry || len(raw) == 0 || raw[0] != '{' {
			continue
		}
		w := where + " entry " + strconv.Itoa(i) + " (" + e.Name + ")"
		var v ptxasValue
		if err := json.Unmarshal(raw, &v); err != nil || v.Set == nil || v.Path == nil || v.PTXKB == nil {
			c.failf("%s: want {set, path, modules, ptx_kb, ms, max_regs, spilled, ptxas}", w)
			return
		}
		section := "ptxas on " + c.ident(w, "set", *v.Set, true)
		path := c.ident(w, "path", *v.Path, true)
		c.ident(w, "ptxas", v.Release, false)
		if v.Modules <= 0 || v.MaxRegs < 0 || v.MaxRegs > 255 || v.Spilled < 0 {
			c.failf("%s: modules %d, max_regs %d, spilled %d out of range", w, v.Modules, v.MaxRegs, v.Spilled)
			return
		}
		note := fmt.Sprintf("%d modules, ptxas %s", v.Modules, v.Release)
		m := func(metric, unit string, val float64, verdict string) {
			p.Batch.Metrics = append(p.Batch.Metrics, store.MetricRow{Kind: CompileMetric, Name: section, Metric: path + ": " + metric,
				Unit: unit, Value: c.num(w, metric, val), Verdict: verdict, Note: note})
		}
		m("PTX a module", "KB", *v.PTXKB, verdict)
		m("ptxas a module", "ms", v.MS, verdict)
		m("registers (most)", "registers", float64(v.MaxRegs), verdict)
		spill := verdict
		if v.Spilled > 0 {
			spill = harness.VerdictFail
		}
		m("bytes spilled", "bytes", float64(v.Spilled), spill)
	}
}
