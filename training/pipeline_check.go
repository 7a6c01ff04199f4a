package training

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/rdzv"
	"github.com/tessera-qa/tessera-qa/engine/dist/tcp"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/engine/numerics"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// StepOutcome is one training step from the initial parameters on every rank of a run.
type StepOutcome struct {
	Loss *tensor.Tensor
	// Grads[r] is world rank r's gradients: its parameters (pipeline: its stages' parameters;
	// data parallelism: all of them), after the averaging over dp.
	Grads    []map[string]*tensor.Tensor
	Pipeline *PipelineInfo // with a pp axis
	// Routing[r] is world rank r's routing of its groups (the moe model).
	Routing [][]*Routing
}

// FirstStep runs step 1 of cfg from the initial parameters on every rank of cfg.Mesh
// (goroutines over the in-process transport; one rank without a mesh) and returns the loss and
// every rank's gradients, before any optimizer touches them: the checks compare them with the
// unpipelined run's. cfg.Dims zero takes the run's default.
func FirstStep(ctx context.Context, cfg Config) (*StepOutcome, error) {
	return FirstStepWith(ctx, cfg, nil)
}

// FirstStepWith is FirstStep with edit applied to every rank's initial parameters (the checks
// set a router to zero, for exact ties).
func FirstStepWith(ctx context.Context, cfg Config, edit func(map[string]*tensor.Tensor)) (*StepOutcome, error) {
	if cfg.Dims == (Dims{}) {
		cfg.Dims = defaultDims(cfg)
	}
	if cfg.DType == 0 {
		cfg.DType = numerics.F32
	}
	world := 1
	if cfg.Mesh != nil {
		world = cfg.Mesh.World()
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = dist.DefaultTimeout
	}
	out := &StepOutcome{Grads: make([]map[string]*tensor.Tensor, world), Routing: make([][]*Routing, world)}
	losses := make([]*tensor.Tensor, world)
	infos := make([]*PipelineInfo, world)
	ts := dist.NewInproc(world)
	errc := make(chan error, world)
	for r := range world {
		go func() {
			c := cfg
			if world > 1 {
				c.Comm = dist.NewComm(ts[r], dist.Options{Mode: cfg.CommMode, Timeout: timeout})
			}
			err := func() error {
				_, st, err := newRankStep(c, r, world, timeout)
				if err != nil {
					return err
				}
				params, err := st.init(c.Seed)
				if err != nil {
					return err
				}
				if edit != nil {
					edit(params)
				}
				loss, grads, err := st.step(ctx, c.Seed, 1, params)
				if err != nil {
					return err
				}
				losses[r], out.Grads[r] = loss, grads
				if ps, ok := st.(*pipeStep); ok {
					infos[r] = ps.info()
				}
				if ms, ok := st.(*moeStep); ok {
					out.Routing[r] = ms.Last
				}
				return nil
			}()
			if err != nil {
				ts[r].Close()
			}
			errc <- err
		}()
	}
	var first error
	for range world {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return nil, first
	}
	for r := 1; r < world; r++ {
		if string(losses[r].Data) != string(losses[0].Data) {
			return nil, errs.New(errs.Nondeterministic, "train: rank %d's loss %x differs from rank 0's %x", r, losses[r].Data, losses[0].Data)
		}
	}
	out.Loss, out.Pipeline = losses[0], infos[0]
	return out, nil
}

// GradDiff is how far one run's gradients are from a reference's.
type GradDiff struct {
	MaxAbs   float64 // largest |a - e| over every element of every rank's gradients
	Worst    string  // the parameter (and rank) of MaxAbs
	Violates string  // the first element outside atol + rtol |e|, "" when none
	Bitwise  bool    // every rank's every gradient has the reference's bytes
	Compared int     // elements compared
}

// CompareGrads compares every rank's gradients with the reference's (one rank's, whole
// parameters; a rank's gradients must be whole tensors: pipeline and data parallelism) within
// atol + rtol |e| per element.
func CompareGrads(ref map[string]*tensor.Tensor, got []map[string]*tensor.Tensor, rtol, atol float64) (GradDiff, error) {
	d := GradDiff{Bitwise: true}
	seen := map[string]bool{}
	for r, gs := range got {
		for name, g := range gs {
			e, ok := ref[name]
			if !ok || e.TypeString() != g.TypeString() {
				return d, errs.New(errs.Shape, "compare: rank %d's gradient of %s is %s, the reference's %v", r, name, g.TypeString(), e)
			}
			seen[name] = true
			if string(e.Data) != string(g.Data) {
				d.Bitwise = false
			}
			for i := range e.Len() {
				a, x := g.Float64(i), e.Float64(i)
				diff := math.Abs(a - x)
				if diff > d.MaxAbs || math.IsNaN(diff) {
					d.MaxAbs, d.Worst = diff, name+" on rank "+strconv.Itoa(r)
				}
				if d.Violates == "" && !(diff <= atol+rtol*math.Abs(x)) {
					d.Violates = errs.New(errs.Input, "%s[%d] on rank %d: %g, reference %g", name, i, r, a, x).Msg
				}
				d.Compared++
			}
		}
	}
	for name := range ref {
		if !seen[name] {
			return d, errs.New(errs.Input, "compare: no rank has a gradient of %s", name)
		}
	}
	return d, nil
}

// Loopback runs cfg like Inproc, but its world goroutine ranks talk over real tcp connections on
// 127.0.0.1 (a rendezvous store on a port the OS picks): the tcp transport's bytes, framing and
// arrival order in one process, for checks that compare transports without starting processes.
func Loopback(ctx context.Context, cfg Config, world int) (*Result, error) {
	if world == 1 {
		return Run(ctx, cfg)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = dist.DefaultTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	srv, err := rdzv.Serve(cctx, "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	job := fmt.Sprintf("loopback-%d-%d", os.Getpid(), loopbackJobs.Add(1))
	res := make([]*Result, world)
	errc := make(chan error, world)
	for r := range world {
		go func() {
			err := func() error {
				st, err := rdzv.Dial(cctx, srv.Addr())
				if err != nil {
					return err
				}
				defer st.Close()
				t, err := tcp.Connect(cctx, tcp.Config{Rank: r, World: world, Store: st, JobID: job, ListenHost: "127.0.0.1", Timeout: 20 * time.Second})
				if err != nil {
					return err
				}
				defer t.Close()
				c := cfg
				var tr dist.Transport = t
				if cfg.Wrap != nil {
					tr = cfg.Wrap(tr)
				}
				c.Comm = dist.NewComm(tr, dist.Options{Mode: dist.Deterministic, Timeout: timeout})
				if r != 0 {
					c.Progress = nil
				}
				res[r], err = Run(ctx, c)
				return err
			}()
			errc <- err
		}()
	}
	var first error
	for range world {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return nil, first
	}
	for r := 1; r < world; r++ {
		if res[r].Digest != res[0].Digest {
			return nil, errs.New(errs.Nondeterministic, "train: rank %d ended with parameters %s, rank 0 with %s", r, res[r].Digest, res[0].Digest)
		}
	}
	return res[0], nil
}

var loopbackJobs atomic.Int64

// GradNorm is the L2 norm (in float64) of every rank's gradients, each parameter counted once
// (data-parallel replicas hold the same averaged gradient).
func GradNorm(o *StepOutcome) float64 {
	seen := map[string]bool{}
	var s float64
	for _, gs := range o.Grads {
		for name, g := range gs {
			if seen[name] {
				continue
			}
			seen[name] = true
			for _, v := range g.Float64s() {
				s += v * v
			}
		}
	}
	return math.Sqrt(s)
}
