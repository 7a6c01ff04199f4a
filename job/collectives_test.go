package job

import (
	"slices"
	"testing"

	"github.com/tessera-qa/tessera-qa/harness"
)

func TestCollectivesSuiteCountsInTheVerdictAndRepeatsItsBits(t *testing.T) {
	var digests [2][]string
	for i := range digests {
		out := t.TempDir()
		rep, err := Run(Options{Backend: "cpu", OutDir: out, Suites: []string{SuiteCollectives}})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() || len(rep.Suites) != 1 || rep.Suites[0].Passed != len(collectivesCases()) || rep.Suites[0].Passed < 30 {
			t.Fatalf("collectives suite: %+v", rep.Suites)
		}
		rs, err := harness.ReadResults(rep.ResultsPath)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Suite != SuiteCollectives || len(r.Digest) != 64 || len(r.Outputs) != 2 || r.Env.Determinism != harness.DeterminismBitwise {
				t.Fatalf("result %+v", r)
			}
			digests[i] = append(digests[i], r.Case+" "+r.Digest)
		}
	}
	if !slices.Equal(digests[0], digests[1]) {
		t.Fatalf("two runs gave different collectives bits")
	}
}
