package mutate

import (
	"fmt"
	"io"
	"strings"
)

// cell is how a verdict reads in the table.
var cell = map[Verdict]string{Caught: "CAUGHT", Missed: "-", Skipped: "skip", Errored: "ERROR", NotRun: "."}

// WriteTable prints the fault x suite table, the baseline and the bits check, and a verdict
// line: what `tessera-qa mutate` shows.
func WriteTable(w io.Writer, rep *Report) {
	width := len("FAULT")
	for _, f := range rep.Faults {
		width = max(width, len(f.Name))
	}
	cols := make([]int, len(rep.Suites))
	row := func(first string, cells func(i int) string) {
		var b strings.Builder
		fmt.Fprintf(&b, "%-*s", width, first)
		for i := range cols {
			fmt.Fprintf(&b, "  %-*s", cols[i], cells(i))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	for i, s := range rep.Suites {
		cols[i] = max(len(s.Name), len("CAUGHT"))
	}
	row("FAULT", func(i int) string { return strings.ToUpper(rep.Suites[i].Name) })
	for _, f := range rep.Faults {
		row(f.Name, func(i int) string { return cell[f.Outcomes[i].Verdict] })
	}
	fmt.Fprintln(w, "\nCAUGHT: the suite failed with the fault on; -: it passed; .: not run; skip: not in this tree or nothing ran")
	for _, s := range rep.Suites {
		switch {
		case s.Missing != "":
			fmt.Fprintf(w, "suite %s: not run: %s\n", s.Name, s.Missing)
		case s.Unusable != "":
			fmt.Fprintf(w, "suite %s: not used: %s\n", s.Name, s.Unusable)
		}
	}
	fmt.Fprintf(w, "no fault on: %s; bits: %s\n", baselineLine(rep), rep.Bits)
	if u := rep.Uncaught(); len(u) > 0 {
		fmt.Fprintf(w, "\nNOT CAUGHT by any suite (%d of %d): %s\nFAIL\n", len(u), len(rep.Faults), strings.Join(u, ", "))
		return
	}
	if !rep.OK() {
		fmt.Fprintf(w, "\nevery fault caught, but the baseline or the bits check failed: the table cannot be trusted\nFAIL\n")
		return
	}
	fmt.Fprintf(w, "\nevery fault (%d) caught by at least one suite (%.0fs)\nPASS\n", len(rep.Faults), rep.Seconds)
}

func baselineLine(rep *Report) string {
	var parts []string
	for _, o := range rep.Baseline {
		v := string(o.Verdict)
		if o.Verdict != Passed {
			v = strings.ToUpper(v)
		}
		parts = append(parts, o.Suite+" "+v)
	}
	if len(parts) == 0 {
		return "no suite ran"
	}
	return strings.Join(parts, ", ")
}

// WriteMarkdown prints the report as the tables of docs/mutations.md: the fault x suite
// matrix, then each fault with what it breaks, where, and the first failure each suite saw.
func WriteMarkdown(w io.Writer, rep *Report) {
	fmt.Fprint(w, "| fault | layer |")
	for _, s := range rep.Suites {
		fmt.Fprintf(w, " %s |", s.Name)
	}
	fmt.Fprint(w, "\n|---|---|")
	for range rep.Suites {
		fmt.Fprint(w, ":-:|")
	}
	fmt.Fprintln(w)
	for _, f := range rep.Faults {
		fmt.Fprintf(w, "| `%s` | %s |", f.Name, f.Layer)
		for _, o := range f.Outcomes {
			fmt.Fprintf(w, " %s |", mdCell(o.Verdict))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	for _, f := range rep.Faults {
		fmt.Fprintf(w, "### `%s`\n\n%s.\n\n- hook: `%s`\n- ops: %s\n", f.Name, capitalize(f.Breaks), f.Hook, opsText(f))
		for _, o := range f.Outcomes {
			if o.Verdict == Caught {
				fmt.Fprintf(w, "- caught by %s: %s\n", o.Suite, mdEscape(o.Detail))
			}
		}
		if len(f.CaughtBy) == 0 {
			fmt.Fprintln(w, "- **caught by no suite**")
		}
		fmt.Fprintln(w)
	}
}

func mdCell(v Verdict) string {
	switch v {
	case Caught:
		return "**caught**"
	case Missed:
		return "missed"
	case Skipped:
		return "skip"
	case Errored:
		return "error"
	}
	return "."
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// opsText lists the ops a fault can change; a judge fault changes none.
func opsText(f FaultReport) string {
	if len(f.Ops) == 0 {
		return "none (the " + string(f.Layer) + " layer changes verdicts, not results)"
	}
	return strings.Join(f.Ops, ", ")
}
