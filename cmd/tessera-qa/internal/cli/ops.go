package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/coverage"
	"github.com/tessera-qa/tessera-qa/engine/graph"
)

// opJSON is one entry of `ops --json` (docs/cli.md).
type opJSON struct {
	Name    string     `json:"name"`
	Kind    string     `json:"kind"`
	Arity   string     `json:"arity"`
	MinArgs int        `json:"min_args"`
	MaxArgs int        `json:"max_args"` // -1: variadic
	DTypes  []string   `json:"dtypes"`
	Attrs   []attrJSON `json:"attrs"`
	Doc     string     `json:"doc"`
}

type attrJSON struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"`
	Required bool   `json:"required"`
	Default  string `json:"default,omitempty"` // as the graph text format writes it
	Doc      string `json:"doc,omitempty"`
	// Values are the allowed values of a string attribute; Aliases other accepted spellings
	// (PyTorch's) and the value each means.
	Values  []string          `json:"values,omitempty"`
	Aliases map[string]string `json:"aliases,omitempty"`
}

func kindName(k graph.OpKind) string { return k.String() }

func newOpsCmd(e *env) *cobra.Command {
	var jsonPath string
	var verbose, cover bool
	cmd := &cobra.Command{
		Use:   "ops",
		Short: "List the op registry: name, kind, arity, dtypes, attributes",
		Long: `List every op the graph format accepts, from the one op registry.

Attributes print as name:kind=default; a trailing '?' marks an optional attribute with no
default, a bare name:kind a required one. -v adds a column with each op's documentation.
Collective ops (kind collective) come last: they need a mesh line (docs/graph-format.md).

--coverage prints one matrix of every op against every check instead (coverage/, each cell
asked of that check's own registry): yes, partial, "-" for an intentionally empty cell with
its reason in coverage/reasons.go, MISSING for a gap. Exit 1 when there is a gap. -v lists each
cell's detail and reason below the matrix. docs/adding-an-op.md walks the columns in order.`,
		Args: exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			if cover {
				return printCoverage(e, jsonPath, verbose)
			}
			ops := opsJSON()
			w := tabwriter.NewWriter(e.human(jsonPath), 0, 0, 2, ' ', 0)
			header := "OP\tKIND\tARITY\tDTYPES\tATTRIBUTES"
			if verbose {
				header += "\tDOC"
			}
			fmt.Fprintln(w, header)
			for _, o := range ops {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s", o.Name, o.Kind, o.Arity, strings.Join(o.DTypes, ","), attrList(o.Attrs))
				if verbose {
					fmt.Fprintf(w, "\t%s", o.Doc)
				}
				fmt.Fprintln(w)
			}
			w.Flush()
			return e.writeJSON(jsonPath, ops)
		}),
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print each op's documentation line (with --coverage: each cell's detail)")
	cmd.Flags().BoolVar(&cover, "coverage", false, "print the matrix of every op against every check")
	addJSONFlag(cmd, &jsonPath)
	return cmd
}

func opsJSON() []opJSON {
	var out []opJSON
	for _, d := range append(graph.Ops(), graph.CollectiveOps()...) {
		o := opJSON{Name: d.Name, Kind: kindName(d.Kind), Arity: d.Arity(), MinArgs: d.MinArgs, MaxArgs: d.MaxArgs,
			Doc: d.Doc, DTypes: []string{}, Attrs: []attrJSON{}}
		for _, dt := range d.DTypes {
			o.DTypes = append(o.DTypes, dt.String())
		}
		for _, a := range d.Attrs {
			aj := attrJSON{Name: a.Name, Kind: a.Kind.String(), Required: a.Default == nil && !a.Optional, Doc: a.Doc,
				Values: a.Values, Aliases: a.Aliases}
			if a.Default != nil {
				aj.Default = graph.FormatAttr(*a.Default)
			}
			o.Attrs = append(o.Attrs, aj)
		}
		out = append(out, o)
	}
	return out
}

func attrList(as []attrJSON) string {
	if len(as) == 0 {
		return "-"
	}
	parts := make([]string, len(as))
	for i, a := range as {
		s := a.Name + ":" + a.Kind
		switch {
		case a.Default != "":
			s += "=" + a.Default
		case !a.Required:
			s += "?"
		}
		if len(a.Values) > 0 {
			s += "{" + strings.Join(a.Values, "|") + "}"
		}
		parts[i] = s
	}
	return strings.Join(parts, " ")
}

// coverageJSON is the shape of `ops --coverage --json` (docs/cli.md).
type coverageJSON struct {
	Checks []string       `json:"checks"`
	Rows   []coverage.Row `json:"rows"`
	Gaps   []string       `json:"gaps"`
}

var coverageMark = map[string]string{coverage.Yes: "yes", coverage.Partial: "partial", coverage.Stated: "-", coverage.Missing: "MISSING"}

func printCoverage(e *env, jsonPath string, verbose bool) error {
	rows := coverage.Matrix(coverage.Registries())
	gaps := coverage.Gaps(rows)
	w := e.human(jsonPath)
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "OP\tKIND\t%s\n", strings.Join(coverage.Checks, "\t"))
	for _, r := range rows {
		marks := make([]string, len(r.Cells))
		for i, c := range r.Cells {
			marks[i] = coverageMark[c.State]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Op, r.Kind, strings.Join(marks, "\t"))
	}
	tw.Flush()
	if verbose {
		for _, r := range rows {
			for _, c := range r.Cells {
				if c.Detail != "" {
					fmt.Fprintf(w, "  %s x %s: %s: %s\n", r.Op, c.Check, coverageMark[c.State], c.Detail)
				}
			}
		}
	}
	gj := coverageJSON{Checks: coverage.Checks, Rows: rows, Gaps: []string{}}
	for _, g := range gaps {
		gj.Gaps = append(gj.Gaps, g.String())
		fmt.Fprintf(w, "gap: %s\n", g)
	}
	fmt.Fprintf(w, "ops --coverage: %d ops x %d checks, %d gaps (\"-\": a reason in coverage/reasons.go; -v shows them)\n", len(rows), len(coverage.Checks), len(gaps))
	if err := e.writeJSON(jsonPath, gj); err != nil {
		return err
	}
	if len(gaps) > 0 {
		return failed()
	}
	return nil
}
