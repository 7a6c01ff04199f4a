package training_test

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/tessera-qa/tessera-qa/determinism/pins"
	"github.com/tessera-qa/tessera-qa/training"
)

// Every rerun and every rank of a training run share its bits, so the specs that compare runs
// with each other pass when the whole workload changes alike; the digests pinned per device
// class (golden/training-pins) do not. Each run pins its final parameters' digest and the
// digest of its loss curve's bits.
var trainingPins = pins.Set{Name: "the training runs", Dir: filepath.Join("..", "..", "golden", "training-pins"),
	RecordEnv: "TESSERA_QA_RECORD_TRAINING_PINS",
	Record:    "TESSERA_QA_RECORD_TRAINING_PINS=1 TESSERA_QA_BIN=- go test ./suites/training -count=1 -ginkgo.focus='pinned for this device class'"}

// pinnedRuns are the runs pinned: each model and optimizer on one rank, data-parallel on 2
// ranks, and the transformer block on a dp=2,tp=2 mesh.
var pinnedRuns = []struct {
	name, model, opt string
	world            int
	mesh             string
}{
	{"mlp/adamw/1", "mlp", "adamw", 1, ""},
	{"mlp/sgd/1", "mlp", "sgd", 1, ""},
	{"transformer-block/adamw/1", "transformer-block", "adamw", 1, ""},
	{"transformer-block/sgd/1", "transformer-block", "sgd", 1, ""},
	{"mlp/adamw/dp=2", "mlp", "adamw", 2, ""},
	{"transformer-block/sgd/dp=2,tp=2", "transformer-block", "sgd", 4, "dp=2,tp=2"},
}

func curveDigest(r *training.Result) string {
	h := sha256.Sum256([]byte(strings.Join(lossBits(r), ",")))
	return hex.EncodeToString(h[:])
}

var _ = Describe("the training runs", Label("pins"), func() {
	It("end with the final parameters and loss curves pinned for this device class (six runs of 10 steps: both models, both optimizers, dp=2, dp=2,tp=2)", func() {
		got := map[string][]string{}
		for _, p := range pinnedRuns {
			r := inprocMesh(p.model, p.opt, 10, p.world, p.mesh)
			Expect(r.Losses).To(HaveLen(10))
			got[p.name] = []string{r.Digest, curveDigest(r)}
		}
		o, err := trainingPins.Check(cpu().DeviceClass(), got)
		Expect(err).NotTo(HaveOccurred())
		if o.Recorded != "" {
			AddReportEntry("recorded", o.Recorded)
			return
		}
		if o.Skip != "" {
			Skip(o.Skip)
		}
		Expect(o.Problem).To(BeEmpty())
		Expect(o.Diff.Same).To(Equal(len(pinnedRuns)))
	})
})
