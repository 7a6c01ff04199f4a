package cli

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/property"
)

func init() { registerVerb(newPropCmd) }

// propJSON is the shape of `prop --json` (docs/cli.md).
type propJSON struct {
	Seed       uint64             `json:"seed,string"`
	Checks     int                `json:"checks"`
	Artifacts  string             `json:"artifacts"`
	Passed     bool               `json:"passed"`
	Properties []property.Outcome `json:"properties"`
}

func newPropCmd(e *env) *cobra.Command {
	var (
		checks     int
		seed       uint64
		backendArg string
		props      []string
		out        string
		failFile   string
		jsonPath   string
	)
	cmd := &cobra.Command{
		Use:   "prop",
		Short: "Property-based checks: random graphs against the golden model, determinism, metamorphic relations",
		Long: `Run the property-based checks of property outside Ginkgo (docs/property.md):

  agree/ref                 random graphs of 1-12 ops vs the golden model, within tolerance
  agree/nan-inf             NaN and Inf land where the golden model puts them
  determinism/bitwise       two runs, the same bits
  meta/...                  metamorphic relations: softmax shift, (AB)^T = B^T A^T, attention
                            under batch permutation, norm scale invariance, reduce of a concat,
                            cast round trips

Each property draws --checks cases with pgregory.net/rapid (default: its own CI count); a
failing one is shrunk to a minimal graph, and its replay manifest ("tessera-qa replay FILE")
and rapid's fail file go under --out. --seed makes the run reproducible (default: random,
always printed). Exit 0 when every property held, 1 when one failed, 3 when --backend names a
backend that cannot run here.`,
		Example: `  tessera-qa prop
  tessera-qa prop --checks 1000 --seed 42 --backend cpu
  tessera-qa prop --property meta/ --json -`,
		Args: exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			if checks < 0 {
				return usage(cmd, "--checks must be >= 0, got %d", checks)
			}
			if !cmd.Flags().Changed("seed") || seed == 0 {
				seed = 1 + rand.Uint64N(1_000_000_000)
			}
			selected, err := property.Select(props)
			if err != nil {
				return usage(cmd, "%v", err)
			}
			if failFile != "" && len(selected) != 1 {
				return usage(cmd, "--failfile replays one property's case: name it with --property")
			}
			bs, err := propBackends(backendArg)
			if err != nil {
				return err
			}
			w := e.human(jsonPath)
			fmt.Fprintf(w, "prop: seed %d (rerun with --seed %d), %d properties on %s, artifacts in %s\n",
				seed, seed, len(selected), backendNames(bs), out)
			fmt.Fprintf(w, "%-34s %-8s %7s %7s %7s %8s\n", "PROPERTY", "BACKEND", "CHECKS", "PASSED", "FAILED", "TIME")
			outcomes := property.Run(property.RunOptions{
				Properties: selected, Backends: bs, Config: property.DefaultConfig(), Checks: checks, Seed: seed,
				Artifacts: out, FailFile: failFile,
				Progress: func(o property.Outcome) { printOutcome(w, o) },
			})
			ok := printPropFailures(w, outcomes, seed)
			if err := e.writeJSON(jsonPath, propJSON{Seed: seed, Checks: checks, Artifacts: out, Passed: ok, Properties: outcomes}); err != nil {
				return err
			}
			if !ok {
				return failed()
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.IntVar(&checks, "checks", 0, "cases per property (default: each property's CI count)")
	f.Uint64Var(&seed, "seed", 0, "base seed of every property's search (default: random, printed)")
	f.StringVar(&backendArg, "backend", "all", "cpu, cuda, or all (every compiled-in backend; unavailable ones are skipped)")
	f.StringSliceVar(&props, "property", nil, "run only properties with these names or name prefixes (comma-separated, e.g. meta/)")
	f.StringVar(&out, "out", "tessera-qa-out/prop", "`DIR` for replay manifests and rapid fail files of failing properties")
	f.StringVar(&failFile, "failfile", "", "replay a rapid fail `FILE` (written under --out by a failing run) before the search")
	addJSONFlag(cmd, &jsonPath)
	return cmd
}

// propBackends resolves --backend: "all" is every compiled-in backend (each reported skipped
// when it cannot run here); a named one must exist (E_UNSUPPORTED) and run here (E_NO_DEVICE).
func propBackends(name string) ([]backend.Backend, error) {
	if name == "all" {
		return backend.All(), nil
	}
	b, err := backend.Get(name)
	if err != nil {
		return nil, err
	}
	if err := b.Available(); err != nil {
		return nil, errs.Wrap(errs.NoDevice, err, "backend %s", name)
	}
	return []backend.Backend{b}, nil
}

func backendNames(bs []backend.Backend) string {
	var n []string
	for _, b := range bs {
		n = append(n, b.Name())
	}
	return strings.Join(n, ", ")
}

func printOutcome(w io.Writer, o property.Outcome) {
	if o.Verdict == property.Skip {
		fmt.Fprintf(w, "%-34s %-8s %7s %7s %7s %8s  skipped\n", o.Property, o.Backend, "-", "-", "-", "-")
		return
	}
	fmt.Fprintf(w, "%-34s %-8s %7d %7d %7d %7.1fs\n", o.Property, o.Backend, o.Checks, o.Passed, o.Failed, o.Seconds)
}

// printPropFailures lists each failing property with how to look at it and rerun it, and
// reports whether there was none.
func printPropFailures(w io.Writer, outcomes []property.Outcome, seed uint64) bool {
	ok := true
	skipped := map[string]bool{}
	for _, o := range outcomes {
		if o.Verdict == property.Skip && !skipped[o.Backend] {
			skipped[o.Backend] = true
			fmt.Fprintf(w, "%s skipped: %s\n", o.Backend, oneLine(o.Reason))
		}
		if o.Verdict != property.Fail {
			continue
		}
		ok = false
		fmt.Fprintf(w, "\nFAIL %s on %s: %s\n", o.Property, o.Backend, o.Reason)
		if o.Replay != "" {
			fmt.Fprintf(w, "  minimal case: tessera-qa replay %s\n", o.Replay)
		}
		if o.FailFile != "" {
			fmt.Fprintf(w, "  rapid fail file: %s (tessera-qa prop --property %s --backend %s --failfile %s)\n", o.FailFile, o.Property, o.Backend, o.FailFile)
		}
		fmt.Fprintf(w, "  rerun: tessera-qa prop --property %s --backend %s --seed %d\n", o.Property, o.Backend, seed)
	}
	if ok {
		fmt.Fprintln(w, "PASS")
	} else {
		fmt.Fprintln(w, "FAIL")
	}
	return ok
}
