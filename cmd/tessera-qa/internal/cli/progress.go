package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/job"
)

// newProgress returns a live bar per suite when w is a terminal, plain lines otherwise (CI
// logs, pipes, tests). Either way failures are announced as they happen, one line each.
func newProgress(w io.Writer) progress {
	if isTerminal(w) {
		return &barProgress{p: mpb.New(mpb.WithOutput(w), mpb.WithWidth(40), mpb.WithRefreshRate(100*time.Millisecond)), bars: map[string]*mpb.Bar{}}
	}
	return &lineProgress{w: w}
}

type progress interface {
	job.Progress
	// Wait flushes the display; call it before printing anything else to the same stream.
	Wait()
}

type lineProgress struct{ w io.Writer }

func (p *lineProgress) SuiteStart(suite string, total int) {
	fmt.Fprintf(p.w, "%s: %d cases\n", suite, total)
}

func (p *lineProgress) CaseDone(suite string, r harness.Result) {
	if r.Failed() {
		fmt.Fprintln(p.w, caseLine(r))
	}
}

func (p *lineProgress) SuiteEnd(s job.SuiteSummary) {
	fmt.Fprintf(p.w, "%s: %d passed, %d failed, %d errors in %s\n", s.Suite, s.Passed, s.Failed, s.Errors, seconds(s.Duration))
}

func (p *lineProgress) Wait() {}

type barProgress struct {
	p    *mpb.Progress
	bars map[string]*mpb.Bar
}

func (p *barProgress) SuiteStart(suite string, total int) {
	p.bars[suite] = p.p.AddBar(int64(total),
		mpb.PrependDecorators(decor.Name(suite, decor.WC{W: 12, C: decor.DindentRight}), decor.CountersNoUnit("%d/%d", decor.WCSyncWidth)),
		mpb.AppendDecorators(decor.Percentage(decor.WC{W: 5}), decor.Elapsed(decor.ET_STYLE_GO, decor.WC{W: 6})),
	)
}

func (p *barProgress) CaseDone(suite string, r harness.Result) {
	if r.Failed() {
		// Written above the bars, so the failure stays on screen.
		fmt.Fprintln(p.p, caseLine(r))
	}
	if b := p.bars[suite]; b != nil {
		b.Increment()
	}
}

func (p *barProgress) SuiteEnd(s job.SuiteSummary) {
	if b := p.bars[s.Suite]; b != nil {
		b.SetTotal(-1, true)
	}
}

func (p *barProgress) Wait() { p.p.Wait() }

// caseLine is one failing or errored case: verdict, suite/case, reason, shortened.
func caseLine(r harness.Result) string {
	reason := strings.Join(strings.Fields(r.Reason), " ")
	if len(reason) > 300 {
		reason = strings.ToValidUTF8(reason[:297], "") + "..."
	}
	return fmt.Sprintf("%s %s/%s: %s", strings.ToUpper(r.Verdict), r.Suite, r.Case, reason)
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }
