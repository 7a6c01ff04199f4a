package job

import (
	"path/filepath"

	"github.com/tessera-qa/tessera-qa/docs/examples"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/usercheck"
)

// The check suite of the main job: `tessera-qa check docs/examples/mlp.tg --oracle none` on
// the run's backend (package usercheck), one result per row of its verdict table. Failing
// rows' manifests go under the run's replay/ folder like every other suite's.
const checkMetaChecks = 10

func (r *runner) checkTasks() []task {
	g, err := graph.Parse(examples.MLP, examples.MLPPath)
	if err != nil {
		return []task{func() harness.Result {
			return r.errored(SuiteCheck, "mlp", errs.Wrap(errs.Internal, err, "example graph"))
		}}
	}
	rep, err := usercheck.Run(usercheck.Options{Graph: g, Seed: 1, Backends: []backend.Backend{r.b}, Oracle: usercheck.OracleNone,
		Artifacts: filepath.Join(r.runDir, "replay"), Self: r.opts.Self, MetaChecks: checkMetaChecks})
	if err != nil {
		return []task{func() harness.Result { return r.errored(SuiteCheck, "mlp", err) }}
	}
	var ts []task
	for _, row := range rep.Rows {
		if row.Backend == "" { // a check of the graph itself: recorded under the run's backend
			row.Backend, row.Device, row.DeviceClass = r.b.Name(), r.b.Device(), r.b.DeviceClass()
		}
		ts = append(ts, func() harness.Result { return row })
	}
	return ts
}
