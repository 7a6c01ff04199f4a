package mutate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	_ "github.com/tessera-qa/tessera-qa/engine/backend/cpu"
	"github.com/tessera-qa/tessera-qa/golden"
)

// BitsCheck compares, with no fault on, the output digests of every golden catalogue spec on
// the CPU backend in a failpoints build (the determinism suite's binary, run as its digest
// child) with those of this process, a normal build: the hooks must cost nothing but time.
type BitsCheck struct {
	Specs int `json:"specs"`
	// NDiffer counts the specs whose digests (or errors) differ; Differ names the first
	// maxDiffer of them.
	NDiffer int      `json:"n_differ"`
	Differ  []string `json:"differ"`
	Error   string   `json:"error,omitempty"`
	Seconds float64  `json:"seconds"`
}

const maxDiffer = 20

// OK reports whether every spec gave the same bits in both builds.
func (b BitsCheck) OK() bool { return b.Error == "" && b.NDiffer == 0 && b.Specs > 0 }

func checkBits(detBinary string, timeout time.Duration) (bc BitsCheck) {
	start := time.Now()
	bc.Differ = []string{}
	defer func() { bc.Seconds = time.Since(start).Seconds() }()
	cpu, err := backend.Get("cpu")
	if err != nil {
		bc.Error = err.Error()
		return bc
	}
	child, err := golden.DigestsFromChild(timeout, detBinary, "-test.run=^TestDeterminism$")
	if err != nil {
		bc.Error = err.Error()
		return bc
	}
	specs := golden.Catalogue()
	here := golden.ComputeDigests(specs, []backend.Backend{cpu})
	for _, s := range specs {
		k := golden.DigestKey(cpu.Name(), s.Name)
		bc.Specs++
		same := slices.Equal(child.Digests[k], here.Digests[k]) && child.Errors[k] == here.Errors[k]
		if _, ok := child.Digests[k]; !ok && child.Errors[k] == "" {
			same = false // the child did not run it at all
		}
		if same {
			continue
		}
		bc.NDiffer++
		if len(bc.Differ) < maxDiffer {
			bc.Differ = append(bc.Differ, s.Name)
		}
	}
	return bc
}

func (b BitsCheck) String() string {
	switch {
	case b.Error != "":
		return "could not compare: " + b.Error
	case b.NDiffer > 0:
		return fmt.Sprintf("the failpoints build differs from the normal build on %d of %d specs: %s", b.NDiffer, b.Specs, strings.Join(b.Differ, ", "))
	}
	return fmt.Sprintf("identical on all %d golden specs", b.Specs)
}
