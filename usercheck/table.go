package usercheck

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/tessera-qa/tessera-qa/harness"
)

// Verdict words of the table.
var verdictWord = map[string]string{harness.VerdictPass: "pass", harness.VerdictFail: "FAIL", harness.VerdictError: "ERROR", harness.VerdictSkip: "skip"}

// Table prints one line per row: check, backend ("-" for checks of the graph itself),
// verdict, and the reason; a failing row's replay manifest on the line below.
func Table(w io.Writer, rows []harness.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tBACKEND\tVERDICT\tDETAIL")
	for _, r := range rows {
		b := r.Backend
		if b == "" {
			b = "-"
		}
		v := verdictWord[r.Verdict]
		if v == "" {
			v = r.Verdict
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", CheckName(r), b, v, oneLine(r.Reason))
		if r.Failed() && r.Replay != "" {
			fmt.Fprintf(tw, "\t\t\treplay: tessera-qa replay %s\n", r.Replay)
		}
	}
	tw.Flush()
}

// Counts returns how many rows passed, failed (fail or error) and were skipped.
func Counts(rows []harness.Result) (pass, fail, skip int) {
	for _, r := range rows {
		switch {
		case r.Verdict == harness.VerdictPass:
			pass++
		case r.Failed():
			fail++
		default:
			skip++
		}
	}
	return
}
