package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/job"
	"github.com/tessera-qa/tessera-qa/usercheck"
)

func init() { registerVerb(newCheckCmd) }

// checkExe is the program the second-process determinism row starts: this binary. A Go test
// binary running the CLI in-process is not one (it would run its tests), so there it is none.
var checkExe = func() (string, error) {
	exe, err := os.Executable()
	if err == nil && strings.HasSuffix(filepath.Base(exe), ".test") {
		return "", errs.New(errs.Unsupported, "%s is a test binary, not tessera-qa", exe)
	}
	return exe, err
}

func newCheckCmd(e *env) *cobra.Command {
	var (
		in, oracle, python, meshSpec, jsonPath, artifacts string
		backends, layouts                                 []string
		seed                                              uint64
		metaChecks                                        int
	)
	cmd := &cobra.Command{
		Use:   "check GRAPH.tg [--in IN.npz] [--backend B,...] [--oracle torch|jax|auto|none] [--mesh M --layout X=L]",
		Short: "Run every check that applies to one graph and print one verdict table",
		Long: `Check one graph text file with the whole battery (docs/cli.md): verify, compile (the
program after each pass is dumped on failure), run on every backend, compare with the float64
golden model (engine/ref) under the harness's tolerances, run again in this process and in a
second process (this program's exec) for the same bits, compare backends of one device class,
compare with the oracle where every op maps (torch by default when it starts here), check the
gradients (reverse mode against float64 finite differences) when the graph is differentiable,
run the metamorphic relations of its ops, and with --mesh run the sharded program against the
one-device answer.

Without --in the inputs are random, drawn from --seed (printed). Each failing row names a
replay manifest under --artifacts that ` + "`tessera-qa replay FILE`" + ` re-runs. --json writes the rows
as harness results, which ` + "`tessera-qa report ingest`" + ` reads.

Exit 0 when no row failed, 1 when one did, 2 on bad usage or input, 3 when an oracle named
with --oracle cannot start.`,
		Example: `  tessera-qa check docs/examples/mlp.tg
  tessera-qa check docs/examples/mlp.tg --in in.npz --oracle none --json check.json
  tessera-qa check docs/examples/mlp.tg --mesh tp=2 --layout w1=col:tp --layout b1=col:tp --layout w2=row:tp`,
		Args: exactArgs("GRAPH"),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			g, err := graph.ParseFile(args[0])
			if err != nil {
				return err
			}
			o := usercheck.Options{Graph: g, Seed: seed, Oracle: oracle, Python: python, Mesh: meshSpec,
				Artifacts: artifacts, MetaChecks: metaChecks}
			if in != "" {
				if o.Inputs, err = job.LoadInputs(g, in); err != nil {
					return err
				}
			}
			for _, name := range backends {
				b, err := backend.Get(name)
				if err != nil {
					return err
				}
				o.Backends = append(o.Backends, b)
			}
			if len(layouts) > 0 && meshSpec == "" {
				return usage(cmd, "--layout needs --mesh")
			}
			if meshSpec != "" {
				if _, _, err := meshOptions(g, meshSpec, layouts); err != nil {
					return err
				}
				o.Layouts = map[string]string{}
				for _, l := range layouts {
					name, text, _ := strings.Cut(l, "=")
					o.Layouts[name] = text
				}
			}
			if self, err := checkExe(); err == nil {
				o.Self = self
			}
			w := e.human(jsonPath)
			source := "inputs from " + in
			if in == "" {
				source = fmt.Sprintf("random inputs, seed %d (--seed)", seed)
			}
			fmt.Fprintf(w, "check %s (graph %s): %s\n", args[0], g.Name, source)
			rep, err := usercheck.Run(o)
			if err != nil {
				return err
			}
			usercheck.Table(w, rep.Rows)
			pass, fail, skip := usercheck.Counts(rep.Rows)
			fmt.Fprintf(w, "check %s: %d passed, %d failed, %d skipped\n", g.Name, pass, fail, skip)
			if err := e.writeJSON(jsonPath, rep.Rows); err != nil {
				return err
			}
			if rep.Failed() {
				return failed()
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&in, "in", "", "`IN.npz` with one array per graph input (default: random inputs from --seed)")
	f.StringSliceVar(&backends, "backend", nil, "backends to run on, comma-separated (default: every one; unavailable ones skip)")
	f.StringVar(&oracle, "oracle", usercheck.OracleAuto, "differential oracle: torch, jax, auto (torch if it starts here) or none")
	f.StringVar(&python, "python", "", "Python interpreter for the oracle (default: $TESSERA_QA_PYTHON, else the first that imports it)")
	f.StringVar(&meshSpec, "mesh", "", "also run the sharded program on this mesh (tp=2, dp=2,tp=2) against the one-device answer")
	f.StringArrayVar(&layouts, "layout", nil, "with --mesh: an input's layout, NAME=LAYOUT (w1=col:tp, x=[S(dp),R]); repeatable")
	f.Uint64Var(&seed, "seed", 1, "seed of the random inputs and of the metamorphic relations' draws")
	f.IntVar(&metaChecks, "meta-checks", usercheck.DefaultMetaChecks, "cases each metamorphic relation draws")
	f.StringVar(&artifacts, "artifacts", "tessera-qa-out/check", "`DIR` for replay manifests and compile dumps of failing rows")
	addJSONFlag(cmd, &jsonPath)
	return cmd
}
