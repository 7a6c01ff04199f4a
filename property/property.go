package property

import (
	"fmt"
	"strings"

	"github.com/onsi/gomega"
	"pgregory.net/rapid"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Suite is the harness.Case suite name of every property case (and of its replay manifests).
const Suite = "property"

// Env is what a property runs against.
type Env struct {
	Backend backend.Backend
	Config  Config
	// Artifacts, when set, receives a replay manifest for each failing case. A property
	// writes one file per (property, backend), so the last failing run rapid makes, the
	// minimal one, is what stays.
	Artifacts string
}

// Property is one randomized check. Its body draws a case with rapid and judges it with
// gomega (gomega.NewWithT(t)), so a failure reports the shrunk case.
type Property struct {
	Name string // hierarchical: agree/ref, determinism/bitwise, meta/softmax-shift
	Doc  string
	// Judged says how strictly: "tolerance", "bitwise", "exact" (equal values, NaN where NaN).
	Judged string
	// Checks is how many cases one CI run draws (suites/property stays under a minute).
	Checks int
	// Ops are the registry ops a metamorphic relation draws its graphs from (`tessera-qa
	// check` runs the relations of a graph's ops); empty for properties over random graphs.
	Ops  []string
	Body func(e Env) func(*rapid.T)
}

// All lists every property, in the order the suite and the CLI run them.
func All() []Property {
	return []Property{
		agreeRef, agreeNaNInf, determinism,
		softmaxShift, transposeProduct, attentionPermutation, normScale, reduceConcat, castRoundTrip,
		gradAgree, gradLinear, gradChain,
		verifyAttrs, rewriteCandidates,
		accumBits,
	}
}

// Select returns the properties whose name equals or starts with one of the patterns
// ("meta/" selects every metamorphic relation); no patterns select all.
func Select(patterns []string) ([]Property, error) {
	if len(patterns) == 0 {
		return All(), nil
	}
	var out []Property
	for _, p := range All() {
		for _, pat := range patterns {
			if p.Name == pat || strings.HasPrefix(p.Name, pat) {
				out = append(out, p)
				break
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no property matches %v (have %s)", patterns, strings.Join(Names(), ", "))
	}
	return out, nil
}

// Names lists the property names.
func Names() []string {
	var n []string
	for _, p := range All() {
		n = append(n, p.Name)
	}
	return n
}

// caseName is the harness case name of property p's cases: fixed, so that the manifest of each
// failing run replaces the previous one and the minimal case is what remains.
func caseName(p string) string { return strings.ReplaceAll(p, "/", "-") }

// run compiles and runs c on e's backend against the golden model, writing a manifest when it
// fails, and fails t unless it passed.
func (e Env) run(t *rapid.T, property string, c harness.Case) harness.Result {
	r := harness.Runner{Backend: e.Backend, ArtifactsDir: e.Artifacts}.Run(c)
	e.expectPass(t, c, r, property)
	return r
}

// expectPass logs what a failing case needs for a reader (the graph, the manifest) and fails t
// with r's reason unless r passed.
func (e Env) expectPass(t *rapid.T, c harness.Case, r harness.Result, property string) {
	if r.Verdict != harness.VerdictPass {
		t.Logf("graph:\n%s", graph.Print(c.Graph))
		if r.Replay != "" {
			t.Logf("replay manifest: %s (re-run it with: tessera-qa replay %s)", r.Replay, r.Replay)
		}
	}
	gomega.NewWithT(t).Expect(r.Verdict).To(gomega.Equal(harness.VerdictPass),
		"%s on %s: %s %s: %s", property, e.Backend.Name(), c.Name, ops(c.Graph), r.Reason)
}

// record writes a manifest for case c (judged against the golden model by a replay) whose
// property check failed for reason, and returns its path ("" without an artifacts dir).
func (e Env) record(t *rapid.T, c harness.Case, reason string) string {
	if e.Artifacts == "" {
		return ""
	}
	r := harness.Result{Backend: e.Backend.Name(), Reason: reason, Env: harness.CaptureEnv(e.Backend)}
	m, err := harness.ManifestFor(c, r)
	var path string
	if err == nil {
		path, err = harness.WriteManifest(e.Artifacts, m)
	}
	if err != nil {
		t.Logf("replay manifest not written: %v", err)
		return ""
	}
	t.Logf("replay manifest: %s (re-run it with: tessera-qa replay %s)", path, path)
	return path
}

func ops(g *graph.Graph) string {
	var names []string
	for _, n := range g.Nodes {
		names = append(names, n.Op)
	}
	return "[" + strings.Join(names, "+") + "]"
}
