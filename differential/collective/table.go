package collective

import (
	"context"
	"sync"

	"github.com/tessera-qa/tessera-qa/differential/gloo"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/harness"
)

// Table checks all its rows the first time any is asked for, with CheckAll (the rows of one
// world in one gloo group), and keeps every result for the callers that follow (a suite's
// specs, one a row). A group per row spent most of its time importing torch and meeting: 111
// rows took 180 s that way on the 2-core CI machine, two groups in flight.
type Table struct {
	Config gloo.Config
	Rows   []Row

	checkAll func(context.Context, gloo.Config, []Row) []harness.Result // CheckAll; tests replace it
	once     sync.Once
	results  map[string]harness.Result
}

// NewTable returns a table over rows.
func NewTable(cfg gloo.Config, rows []Row) *Table { return &Table{Config: cfg, Rows: rows} }

// Result returns the row's result, checking the whole table first if nothing was asked yet. A
// row that is not in the table is an error result.
func (t *Table) Result(r Row) harness.Result {
	t.once.Do(func() {
		check := t.checkAll
		if check == nil {
			check = CheckAll
		}
		res := check(context.Background(), t.Config, t.Rows)
		t.results = map[string]harness.Result{}
		for i, row := range t.Rows {
			t.results[row.Name()] = res[i]
		}
	})
	res, ok := t.results[r.Name()]
	if !ok {
		return harness.Result{Schema: harness.ResultSchema, Suite: Suite, Case: r.Name(), Verdict: harness.VerdictError,
			ErrorCode: string(errs.Input), Reason: errs.New(errs.Input, "row %s is not in the table", r.Name()).Error()}
	}
	return res
}
