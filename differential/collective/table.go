package collective

import (
	"context"
	"sync"

	"github.com/tessera-qa/tessera-qa/differential/gloo"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Table runs Check for its rows on demand and keeps every result. Asking for row i also starts
// the next Ahead rows of Rows in the background, so that a caller walking the table in order
// (a suite's specs) has Ahead+1 gloo groups in flight: most of a group's time is its ranks
// importing torch and meeting, which overlaps well even on two cores (measured: 20 rows took
// 36 s two at a time, 81 s one at a time, on a loaded 2-core machine). A caller asking for
// one row starts at most Ahead rows it will not read.
type Table struct {
	Config gloo.Config
	Rows   []Row
	Ahead  int

	check func(context.Context, gloo.Config, Row) harness.Result // Check; tests replace it
	mu    sync.Mutex
	runs  map[string]*tableRun
	index map[string]int
}

type tableRun struct {
	done chan struct{}
	res  harness.Result
}

// NewTable returns a table over rows with ahead rows of look-ahead.
func NewTable(cfg gloo.Config, rows []Row, ahead int) *Table {
	return &Table{Config: cfg, Rows: rows, Ahead: ahead}
}

// Result returns the row's result, running it (and starting the rows after it) if needed. A
// row that is not in the table is an error result.
func (t *Table) Result(r Row) harness.Result {
	t.mu.Lock()
	if t.runs == nil {
		t.runs, t.index = map[string]*tableRun{}, map[string]int{}
		for i, row := range t.Rows {
			t.index[row.Name()] = i
		}
		if t.check == nil {
			t.check = Check
		}
	}
	i, ok := t.index[r.Name()]
	if !ok {
		t.mu.Unlock()
		return harness.Result{Schema: harness.ResultSchema, Suite: Suite, Case: r.Name(), Verdict: harness.VerdictError,
			ErrorCode: string(errs.Input), Reason: errs.New(errs.Input, "row %s is not in the table", r.Name()).Error()}
	}
	var run *tableRun
	for j := i; j < len(t.Rows) && j <= i+max(t.Ahead, 0); j++ {
		row := t.Rows[j]
		p, started := t.runs[row.Name()]
		if !started {
			p = &tableRun{done: make(chan struct{})}
			t.runs[row.Name()] = p
			go func() {
				defer close(p.done)
				p.res = t.check(context.Background(), t.Config, row)
			}()
		}
		if j == i {
			run = p
		}
	}
	t.mu.Unlock()
	<-run.done
	return run.res
}
