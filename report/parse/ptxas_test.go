package parse_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report/parse"
)

// testdata/ginkgo/ptxas.json is the Ginkgo JSON report of a real run of suites/ptxas (ptxas
// 11.8 on the 2-core development machine, 2026-11-25).
func ptxasReport(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "ginkgo", "ptxas.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestPTXASEntriesBecomeCompileMetrics(t *testing.T) {
	p, err := parse.Parse("ptxas.json", []byte(ptxasReport(t)))
	if err != nil {
		t.Fatal(err)
	}
	ms := metricsOf(t, &p.Batch, parse.CompileMetric)
	if len(ms) != 4*11 { // 5 paths of the catalogue, 6 of the random graphs, 4 metrics a path
		t.Errorf("%d metrics", len(ms))
	}
	kb := ms["ptxas on golden catalogue: simt-stream: PTX a module"]
	if kb.Unit != "KB" || kb.Value < 16.2 || kb.Value > 16.4 || kb.Verdict != harness.VerdictPass || kb.Note != "498 modules, ptxas 11.8" {
		t.Errorf("stream PTX a module %+v", kb)
	}
	regs := ms["ptxas on golden catalogue: simt-stream: registers (most)"]
	if regs.Value != 138 || regs.Unit != "registers" {
		t.Errorf("stream registers %+v", regs)
	}
	if sp := ms["ptxas on random graphs: simt: bytes spilled"]; sp.Value != 0 || sp.Verdict != harness.VerdictPass {
		t.Errorf("simt spills %+v", sp)
	}
}

func TestPTXASEntriesAreChecked(t *testing.T) {
	data := ptxasReport(t)
	// Spills fail their metric even where the spec (wrongly) passed.
	spill := strings.Replace(data, `\"path\":\"simt\",\"ptx_kb\":12.749680722891567,\"ptxas\":\"11.8\",\"set\":\"golden catalogue\",\"spilled\":0`,
		`\"path\":\"simt\",\"ptx_kb\":12.749680722891567,\"ptxas\":\"11.8\",\"set\":\"golden catalogue\",\"spilled\":64`, 1)
	if spill == data {
		t.Fatal("the spill edit matches nothing")
	}
	p, err := parse.Parse("ptxas.json", []byte(spill))
	if err != nil {
		t.Fatal(err)
	}
	if sp := metricsOf(t, &p.Batch, parse.CompileMetric)["ptxas on golden catalogue: simt: bytes spilled"]; sp.Value != 64 || sp.Verdict != harness.VerdictFail {
		t.Errorf("a spilling path %+v", sp)
	}
	for name, edit := range map[string][2]string{
		"no set":             {`\"set\":\"golden catalogue\"`, `\"sett\":\"golden catalogue\"`},
		"no modules":         {`\"modules\":18,`, `\"modules\":0,`},
		"too many registers": {`\"max_regs\":31,`, `\"max_regs\":300,`},
		"negative time":      {`\"ms\":53.`, `\"ms\":-53.`},
		"control chars":      {`\"path\":\"mma.sync\"`, `\"path\":\"mma\\u0001sync\"`},
		"not JSON":           {`{\"max_regs\":31,`, `{\"max_regs\":31,,`},
	} {
		bad := strings.Replace(data, edit[0], edit[1], 1)
		if bad == data {
			t.Fatalf("%s: the edit %q matches nothing", name, edit[0])
		}
		if _, err := parse.Parse("ptxas.json", []byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
