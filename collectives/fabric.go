package collectives

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/fabric"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
)

// Fabric is --topology: the in-process world runs over a modeled fabric (engine/dist/fabric).
type Fabric struct {
	Topology *fabric.Topology
	Real     bool // real (throttled) time; virtual (the discrete-event clock) otherwise
	Flat     bool // all_reduce keeps the flat route even where the topology has nodes
	Faults   []fabric.Fault
}

// runFabric runs cfg on a world of n goroutine ranks over the fabric: all_reduce takes the
// hierarchical route when the topology spans several whole nodes (unless Flat), the calls
// are timed on the fabric's clock, and every row gets the model's time beside the measured
// one. Where the mode guarantees bits, the same cases run again on the bare inproc transport
// with the flat route, untimed, and each row says whether its digests equal that run's.
func runFabric(ctx context.Context, fo *Fabric, n int, cfg Config) ([]Row, error) {
	topo, err := fo.Topology.For(n)
	if err != nil {
		return nil, err
	}
	fab := fabric.New(topo, !fo.Real, cfg.Seed)
	if err := fab.SetFaults(fo.Faults); err != nil {
		return nil, err
	}
	c := cfg
	c.Wrap = fab.Wrap
	if !fo.Flat {
		c.HierNode = topo.HierNode(n)
	}
	rows, err := RunInproc(ctx, n, c)
	if err != nil {
		return nil, err
	}
	clock := "virtual"
	if fo.Real {
		clock = "real"
	}
	for i := range rows {
		r := &rows[i]
		r.Topology, r.Clock = topo.Spec, clock
		dt, _ := numerics.Parse(r.DType)
		hier := 0
		if r.Op == string(AllReduce) {
			r.Algo = "flat"
			red, _ := dist.ParseRedOp(r.RedOp)
			if c.HierNode > 0 && r.Mode != dist.Exact.String() && (red == dist.Sum || red == dist.Avg) {
				r.Algo, hier = "hier", c.HierNode
			}
		}
		op := r.Op
		if r.Op == string(Broadcast) && r.Root != 0 {
			op = "" // the model knows broadcast from root 0
		}
		r.PredUS = float64(topo.Predict(op, dt.Size(), dist.AccBytes(dt), r.Count, hier)) / float64(time.Microsecond)
	}
	if !cfg.Mode.BitsGuaranteed() {
		return rows, nil
	}
	flat := cfg
	flat.Iters, flat.Warmup, flat.Progress, flat.Delay = 0, 0, nil, 0
	twin, err := RunInproc(ctx, n, flat)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		eq := i < len(twin) && twin[i].Digest == rows[i].Digest && twin[i].DigestIP == rows[i].DigestIP
		rows[i].FlatBits = &eq
	}
	return rows, nil
}

// fabricChecks are --topology's verdicts over the rows: the flat route's bits where the mode
// guarantees them, and in virtual time the measured times within the model's stated error.
func fabricChecks(rows []Row) []Check {
	var bits, model Check
	compared, timed := 0, 0
	spec := ""
	for _, r := range rows {
		if r.Topology == "" {
			continue
		}
		spec = r.Topology
		if r.FlatBits != nil {
			compared++
			if !*r.FlatBits {
				bits.Detail = append(bits.Detail, fmt.Sprintf("%s world %d (%s): digest %s differs from the flat route's", r.Key(), r.World, r.Algo, short(r.Digest)))
			}
		}
		if r.Clock == "virtual" && r.TimeUS > 0 && r.PredUS > 0 {
			timed++
			got := time.Duration(r.TimeUS * float64(time.Microsecond))
			want := time.Duration(r.PredUS * float64(time.Microsecond))
			if !fabric.Within(got, want) {
				model.Detail = append(model.Detail, fmt.Sprintf("%s world %d (%s): measured %.1f us, predicted %.1f us", r.Key(), r.World, r.Algo, r.TimeUS, r.PredUS))
			}
		}
	}
	var out []Check
	if compared > 0 {
		bits.Name = fmt.Sprintf("topology %s: the flat algorithm's bits (%d rows)", spec, compared)
		bits.Passed = len(bits.Detail) == 0
		out = append(out, bits)
	}
	if timed > 0 {
		model.Name = fmt.Sprintf("fabric model: measured within %.0f%% + %s of predicted (%d timed rows, virtual time)", 100*fabric.ErrorBound, fabric.AbsSlack, timed)
		model.Passed = len(model.Detail) == 0
		out = append(out, model)
	}
	return out
}

// PrintFabric prints, for rows run over a modeled fabric, the measured time beside the
// model's and the all_reduce route.
func PrintFabric(w io.Writer, rows []Row) {
	header := false
	for _, r := range rows {
		if r.Topology == "" || r.TimeUS <= 0 {
			continue
		}
		if !header {
			fmt.Fprintf(w, "\n# fabric %s (%s time): measured vs the model's time per call\n", r.Topology, r.Clock)
			fmt.Fprintf(w, "# %14s %6s %6s %6s %12s %5s %12s %12s %8s\n", "op", "world", "dtype", "redop", "size(B)", "algo", "measured(us)", "predicted(us)", "error")
			header = true
		}
		e := "-"
		if r.PredUS > 0 {
			e = fmt.Sprintf("%+.1f%%", 100*(r.TimeUS/r.PredUS-1))
		}
		fmt.Fprintf(w, "  %14s %6d %6s %6s %12d %5s %12.2f %12.2f %8s\n", r.Op, r.World, r.DType, r.RedOp, r.Bytes, r.Algo, r.TimeUS, r.PredUS, e)
	}
}
