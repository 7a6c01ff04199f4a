package stress

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/property"
)

// GraphConfig bounds the random graphs of a stress run: small enough that a CPU job runs
// tens of graphs a second, so a one-minute soak has thousands of comparisons.
func GraphConfig() property.Config {
	return property.Config{MaxOps: 6, MaxElems: 1 << 12, MaxWork: 1 << 16}
}

// Graph is one graph of a job's pool: the seed it is built from and the digest it gave alone.
type Graph struct {
	Seed    uint64    `json:"seed,string"`
	Ops     string    `json:"ops"`
	Digest  string    `json:"digest"`
	AloneMS []float64 `json:"alone_ms"`
}

// Plan is what every job runs: per job, a pool of graphs with their alone digests. Processes
// read it from a file, so all of them judge against the same digests.
type Plan struct {
	Seed     uint64    `json:"seed,string"`
	Device   string    `json:"device"`
	Workload string    `json:"workload,omitempty"` // WorkloadGraphs (also "") or WorkloadTrain
	Jobs     [][]Graph `json:"jobs"`
}

// maxBuildAttempts bounds how many seeds a pool slot tries before giving up on a graph the
// backend cannot run alone.
const maxBuildAttempts = 16

// GraphSeed is the seed of attempt a at slot i of job j.
func GraphSeed(seed uint64, j, i, a int) uint64 {
	return harness.SubSeed(seed, "stress/job/"+strconv.Itoa(j)+"/graph/"+strconv.Itoa(i)+"/attempt/"+strconv.Itoa(a))
}

// BuildCase builds the graph of seed as a harness case named name. When digest is not empty
// the case is a determinism check against it (harness.Case.ExpectDigests).
func BuildCase(seed uint64, name, digest string) (c harness.Case, ops string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errs.New(errs.Internal, "stress: graph of seed %d: generator panicked: %v", seed, r)
		}
	}()
	spec := property.SpecGen(GraphConfig().MaxOps).Example(int(seed & (1<<62 - 1)))
	pc, err := property.Build(spec, GraphConfig())
	if err != nil {
		return harness.Case{}, "", err
	}
	c = pc.Harness("stress", name, seed)
	c.Tolerances = nil
	if digest != "" {
		c.ExpectDigests = splitDigest(pc, digest)
	}
	return c, pc.Ops(), nil
}

// A graph's digest is compared output by output (harness.Case.ExpectDigests); Graph.Digest
// stores the per-output digests joined by ','.
func splitDigest(pc *property.Case, d string) []string {
	out := make([]string, 0, len(pc.Graph.Outputs))
	start := 0
	for i := 0; i < len(d); i++ {
		if d[i] == ',' {
			out = append(out, d[start:i])
			start = i + 1
		}
	}
	return append(out, d[start:])
}

func joinDigests(r harness.Result) string {
	s := ""
	for i, o := range r.Outputs {
		if i > 0 {
			s += ","
		}
		s += o.Digest
	}
	return s
}

// MakePlan builds each job's pool of perJob graphs and runs each alone reps times on b, one
// graph at a time, recording its digest and latencies. A slot whose graph the backend cannot
// run alone (a compile or run error) takes the next seed: the soak judges interference, not
// the engine's coverage, which the property suite owns. Alone runs that disagree with each
// other are already nondeterminism and fail the plan.
func MakePlan(b backend.Backend, seed uint64, jobs, perJob, reps int) (*Plan, error) {
	p := &Plan{Seed: seed, Device: b.Name(), Jobs: make([][]Graph, jobs)}
	rn := harness.Runner{Backend: b}
	for j := range jobs {
		for i := range perJob {
			var g *Graph
			for a := 0; a < maxBuildAttempts && g == nil; a++ {
				s := GraphSeed(seed, j, i, a)
				c, ops, err := BuildCase(s, caseName(j, i), "")
				if err != nil {
					continue
				}
				c.ExpectDigests = make([]string, len(c.Graph.Outputs)) // digest only: no golden model
				cand := &Graph{Seed: s, Ops: ops}
				for r := range reps {
					res := rn.Run(c)
					if len(res.Outputs) != len(c.Graph.Outputs) || res.Verdict == harness.VerdictError || res.Verdict == harness.VerdictSkip {
						cand = nil
						break
					}
					d := joinDigests(res)
					if r == 0 {
						cand.Digest = d
					} else if d != cand.Digest {
						return nil, errs.New(errs.Nondeterministic, "stress: graph %s (seed %d) gave two digests alone: %s then %s", caseName(j, i), s, cand.Digest, d)
					}
					cand.AloneMS = append(cand.AloneMS, res.Timing.TotalMS)
				}
				g = cand
			}
			if g == nil {
				return nil, errs.New(errs.Internal, "stress: no graph for %s runs alone on %s after %d seeds", caseName(j, i), b.Name(), maxBuildAttempts)
			}
			p.Jobs[j] = append(p.Jobs[j], *g)
		}
	}
	return p, nil
}

func caseName(j, i int) string { return fmt.Sprintf("job%d-graph%d", j, i) }

// WritePlan and ReadPlan move a plan to worker processes.
func WritePlan(path string, p *Plan) error {
	b, err := json.Marshal(p)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "stress: encode plan")
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return errs.Wrap(errs.Input, err, "stress: write plan %s", path)
	}
	return nil
}

func ReadPlan(path string) (*Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errs.Wrap(errs.Input, err, "stress: read plan %s", path)
	}
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, errs.Wrap(errs.Input, err, "stress: plan %s", path)
	}
	return &p, nil
}
