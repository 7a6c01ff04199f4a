package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist/fabric"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/training"
)

// Planted bugs a scenario can switch on, so the checker's tests can show it catches them.
const (
	// PlantAcceptBadChecksum: net/corrupt keeps the frame's checksum valid, as a receiver
	// that accepted a frame with a bad checksum would see it.
	PlantAcceptBadChecksum = "accept-bad-checksum"
)

// Scenario is one chaos run as data: the workload, the world, the faults with their steps,
// and the bounds. Exploratory scenarios come from RandomScenario (named random-SEED),
// regression scenarios from Regressions (named after the bug they reproduce).
type Scenario struct {
	Name            string      `json:"name"`
	Workload        string      `json:"workload"` // train:MODEL, a model of training.Models or train:moe
	World           int         `json:"world"`
	Mesh            string      `json:"mesh,omitempty"` // dp=N,tp=M: the workload is tensor parallel over the world
	Transport       string      `json:"transport"`      // tcp (processes) or inproc (goroutines)
	Backend         string      `json:"backend"`        // cpu or cuda
	Steps           int         `json:"steps"`
	CheckpointEvery int         `json:"checkpoint_every"`
	Seed            uint64      `json:"seed"` // the workload's seed
	ScheduleSeed    uint64      `json:"schedule_seed,omitempty"`
	CommTimeout     Duration    `json:"comm_timeout"`
	MaxRestarts     int         `json:"max_restarts"`
	Bound           Duration    `json:"bound"` // the whole run, restarts included: past it the run hung
	Faults          []Injection `json:"faults"`
	Plant           string      `json:"plant,omitempty"`
	// Profile makes every rank record its kernels and collectives (training's ProfileDir) into
	// the run's artifacts, profile/attempt-N/; the checker's pass merges each attempt into a
	// trace and a per-rank summary (profile.go).
	Profile bool `json:"profile,omitempty"`
	// Topology, when set, makes the ranks (inproc) train over a modeled fabric of this
	// description (engine/dist/fabric: nodes=GxL, racks=RxGxL, nvl72...) in virtual time: the
	// real frames pay each link's modeled cost on a discrete-event clock, which costs no wall
	// time, so a world of 64 over a slow network runs as fast as its bytes move; the fabric/*
	// faults act on it.
	Topology string `json:"topology,omitempty"`
}

// Defaults for a scenario's zero fields.
const (
	DefaultSteps       = 60
	DefaultCheckEvery  = 10
	DefaultCommTimeout = 3 * time.Second
	DefaultBound       = 3 * time.Minute
)

// CommTimeoutFor is the default bound on a collective for a world of n ranks:
// DefaultCommTimeout up to 8 ranks, then as much again per 8 more. The bound must outlast a
// healthy collective, and one among n ranks that share a machine's cores (goroutine ranks, a
// modeled fabric) waits for the slowest of them: at 64 ranks on 2 cores a checkpoint barrier
// took longer than 3 s with no fault (docs/reliability.md), so a fixed 3 s turned load into
// E_TIMEOUT_COMM restarts.
func CommTimeoutFor(n int) time.Duration {
	return DefaultCommTimeout * time.Duration(max(1, (n+7)/8))
}

// Normalize fills defaults and checks the scenario.
func (s *Scenario) Normalize() error {
	if s.Workload == "" {
		s.Workload = "train:mlp"
	}
	if s.Mesh != "" {
		ms, err := mesh.ParseMesh(s.Mesh)
		if err != nil {
			return errs.Wrap(errs.Input, err, "chaos: --mesh")
		}
		if s.World == 0 {
			s.World = ms.World()
		}
		if s.World != ms.World() {
			return errs.New(errs.Input, "chaos: mesh %s has %d ranks, the world %d", ms, ms.World(), s.World)
		}
		s.Mesh = ms.String()
	}
	if s.World == 0 {
		s.World = 3
	}
	if s.Transport == "" {
		s.Transport = "tcp"
		if s.Topology != "" {
			s.Transport = "inproc"
		}
	}
	if s.Backend == "" {
		s.Backend = "cpu"
	}
	if s.Steps == 0 {
		s.Steps = DefaultSteps
	}
	if s.CheckpointEvery == 0 {
		s.CheckpointEvery = DefaultCheckEvery
	}
	if s.Seed == 0 {
		s.Seed = 1
	}
	if s.CommTimeout == 0 {
		s.CommTimeout = Duration(CommTimeoutFor(s.World))
	}
	if s.Bound == 0 {
		s.Bound = Duration(DefaultBound)
	}
	if _, err := s.Model(); err != nil {
		return err
	}
	switch {
	case s.World < 1 || s.World > 64:
		return errs.New(errs.Input, "chaos: world %d (want 1..64)", s.World)
	case s.Transport != "tcp" && s.Transport != "inproc":
		return errs.New(errs.Input, "chaos: transport %q (want tcp or inproc)", s.Transport)
	case s.Steps < 2 || s.CheckpointEvery < 1 || s.CheckpointEvery >= s.Steps:
		return errs.New(errs.Input, "chaos: %d steps with a checkpoint every %d (want steps >= 2 and 1 <= checkpoint-every < steps)", s.Steps, s.CheckpointEvery)
	case s.MaxRestarts < 0:
		return errs.New(errs.Input, "chaos: --max-restarts %d", s.MaxRestarts)
	case s.Topology != "" && s.Transport != "inproc":
		return errs.New(errs.Input, "chaos: --topology %s: the modeled fabric joins goroutine ranks of one process (--transport inproc), not %s", s.Topology, s.Transport)
	}
	if _, err := s.topology(); err != nil {
		return err
	}
	if s.Name == "" {
		var names []string
		for _, in := range s.Faults {
			names = append(names, in.Fault.Name())
		}
		s.Name = "manual/" + strings.Join(names, "+")
	}
	run := s.Run(false)
	for i := range s.Faults {
		in := &s.Faults[i]
		if in.ID == "" {
			in.ID = fmt.Sprintf("f%d", i)
		}
		if in.Rank < 0 || in.Rank >= s.World {
			return errs.New(errs.Input, "chaos: %s: rank %d outside world %d", in.Fault.Name(), in.Rank, s.World)
		}
		if in.Step < 1 || in.Step >= s.Steps {
			return errs.New(errs.Input, "chaos: %s: step %d (want 1..%d: the fault must come before the last step)", in.Fault.Name(), in.Step, s.Steps-1)
		}
		if err := in.Fault.Available(run); err != nil && errs.CodeOf(err) != errs.Unsupported {
			return err
		}
		if rc, ok := in.Fault.(rankChecker); ok {
			if err := rc.checkAt(run, in.Rank); err != nil {
				return err
			}
		}
	}
	if s.MaxRestarts == 0 {
		s.MaxRestarts = 2
		for _, in := range s.Faults {
			if in.Fault.Expect(run).Restart {
				s.MaxRestarts++
			}
		}
	}
	return nil
}

// Model is the workload's model name.
func (s *Scenario) Model() (string, error) {
	m, ok := strings.CutPrefix(s.Workload, "train:")
	if !ok || !(slices.Contains(training.Models, m) || m == training.MoEModel) {
		return "", errs.New(errs.Input, "chaos: workload %q (want train:%s or train:%s)", s.Workload, strings.Join(training.Models, ", train:"), training.MoEModel)
	}
	return m, nil
}

// Dims sizes the model so that its global batch splits over the world.
func (s *Scenario) Dims() training.Dims {
	m, _ := s.Model()
	d := training.DefaultDims(m)
	if ms, err := mesh.ParseMesh(s.Mesh); err == nil && ms.AxisIndex("pp") >= 0 {
		// A pipeline: the batch splits into dp ranks x the default 2 x pp micro-batches.
		d = training.PipelineDims(m, max(1, ms.Size("dp")), 2*ms.Size("pp"))
	}
	if r := d.Batch % s.World; r != 0 {
		d.Batch += s.World - r
	}
	return d
}

// Run is what the faults see of the scenario; root: the agent runs as root.
func (s *Scenario) Run(root bool) Run {
	topo, _ := s.topology()
	return Run{Transport: s.Transport, World: s.World, CommTimeout: time.Duration(s.CommTimeout), Backend: s.Backend,
		Root: root, CheckEvery: s.CheckpointEvery, Topology: topo}
}

// topology is the parsed Topology sized to the world (nil without one); E_INPUT when it does
// not parse or does not hold the world.
func (s *Scenario) topology() (*fabric.Topology, error) {
	if s.Topology == "" {
		return nil, nil
	}
	t, err := fabric.Parse(s.Topology)
	if err != nil {
		return nil, errs.Wrap(errs.Input, err, "chaos: --topology")
	}
	if t, err = t.For(s.World); err != nil {
		return nil, errs.Wrap(errs.Input, err, "chaos: --topology (--world %d)", s.World)
	}
	return t, nil
}

// Unavailable lists the scheduled faults that cannot act in this run, with why.
func (s *Scenario) Unavailable(r Run) []string {
	var out []string
	for _, in := range s.Faults {
		if err := in.Fault.Available(r); err != nil {
			out = append(out, in.ID+": "+errs.Message(err))
		}
	}
	return out
}

// MarshalIndent is the scenario as indented JSON.
func (s *Scenario) MarshalIndent() []byte {
	b, _ := json.MarshalIndent(s, "", "  ")
	return b
}

// LoadScenario reads a scenario from a JSON file.
func LoadScenario(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errs.New(errs.Input, "chaos: scenario %s: %v", path, err)
	}
	s := &Scenario{}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, errs.New(errs.Input, "chaos: scenario %s: %v", path, err)
	}
	return s, s.Normalize()
}

// RandomScenario is exploratory scenario number seed: one to three faults drawn from the
// kinds available to base's run (kinds listed in only, when only is not empty), at random
// ranks and steps, with random parameters. The same base and seed give the same scenario.
func RandomScenario(base Scenario, seed uint64, r Run, only []string) (*Scenario, error) {
	s := base
	s.Faults = nil
	s.ScheduleSeed = seed
	s.Name = fmt.Sprintf("random-%d", seed)
	if err := s.Normalize(); err != nil {
		return nil, err
	}
	r.World, r.Transport, r.CheckEvery, r.CommTimeout, r.Backend = s.World, s.Transport, s.CheckpointEvery, time.Duration(s.CommTimeout), s.Backend
	r.Topology = s.Run(false).Topology
	var kinds []Fault
	for _, f := range Catalogue() {
		if f.Available(r) == nil && (len(only) == 0 || slices.Contains(only, f.Name())) {
			kinds = append(kinds, f)
		}
	}
	if len(kinds) == 0 {
		return nil, errs.New(errs.Unsupported, "chaos: no fault kind is available to a %s run of world %d here", s.Transport, s.World)
	}
	rng := rand.New(rand.NewPCG(seed, 0x63686173)) // "chas"
	n := 1 + rng.IntN(3)
	k := s.CheckpointEvery
	for i := range n {
		proto := kinds[rng.IntN(len(kinds))]
		f, _ := NewFault(proto.Name())
		lo, hi := 2, s.Steps-1
		switch f.(type) {
		case checkpointFault:
			lo = 2 * k // a checkpoint before the damaged one to fall back to
			hi = s.Steps - k
		case *DiskFull:
			hi = s.Steps - k - 1 // a checkpoint must come while the disk is full
		case *Slow, *FabricFlap, *FabricSlow, *FabricCongest:
			hi = s.Steps - 4*stragglerWindow // steps enough, while slow, for the watch's windows
		}
		if hi < lo {
			hi = lo
		}
		step := lo + rng.IntN(hi-lo+1)
		rank := rng.IntN(s.World)
		randomize(f, rng, s.World, time.Duration(s.CommTimeout))
		randomizeFabric(f, rng, r, rank)
		s.Faults = append(s.Faults, Injection{ID: fmt.Sprintf("f%d", i), Fault: f, Rank: rank, Step: step})
	}
	s.MaxRestarts = 0
	if err := s.Normalize(); err != nil {
		return nil, err
	}
	return &s, nil
}

// randomize draws a fault's parameters.
func randomize(f Fault, rng *rand.Rand, world int, timeout time.Duration) {
	switch f := f.(type) {
	case *Hang:
		if rng.IntN(3) == 0 {
			f.For = Duration(timeout / 5) // tolerated: shorter than the bound
		}
	case *Delay:
		if rng.IntN(3) == 0 {
			f.By = Duration(timeout / 10)
		}
	case *Drop:
		f.Frames = 1 + rng.IntN(3)
	case *Corrupt:
		f.Bit = 1 + rng.IntN(8*64)
	case *Partition:
		if world > 2 && rng.IntN(2) == 0 {
			a := rng.IntN(world)
			b := (a + 1 + rng.IntN(world-1)) % world
			f.Side = []int{min(a, b), max(a, b)}
		}
	case *StoreRestart:
		f.Down = Duration(time.Duration(50+rng.IntN(400)) * time.Millisecond)
	}
}

// randomizeFabric draws a fabric fault's parameters (rank: where it is injected).
func randomizeFabric(f Fault, rng *rand.Rand, r Run, rank int) {
	peer := func() *int {
		p := (rank + 1 + rng.IntN(r.World-1)) % r.World
		return &p
	}
	switch f := f.(type) {
	case *FabricFlap:
		f.Peer = peer()
		p := time.Duration(100+rng.IntN(200)) * time.Microsecond
		f.Period, f.Down = Duration(p), Duration(p*time.Duration(60+rng.IntN(30))/100)
	case *FabricSlow:
		f.Peer, f.Factor = peer(), float64(10+rng.IntN(31))
	case *FabricCongest:
		if r.Topology != nil {
			n := rng.IntN((r.World + r.Topology.NodeSize - 1) / r.Topology.NodeSize)
			f.Node = &n
		}
		f.Factor = float64(4 + rng.IntN(13))
	case *FabricCorrupt:
		f.Every = 16 + rng.IntN(241)
	}
}

// Regressions are the named scenarios, each after the bug it reproduces (or guards against):
// run by the chaos suite on every change.
func Regressions(world int) []*Scenario {
	mk := func(name string, ins ...Injection) *Scenario {
		return &Scenario{Name: "regression/" + name, World: world, Faults: ins}
	}
	one := func(f Fault, rank, step int) Injection { return Injection{Fault: f, Rank: rank, Step: step} }
	last := world - 1
	return []*Scenario{
		// A rank killed right after a checkpoint: the resume must start at that checkpoint,
		// not at the step after it (the off-by-one this harness was built to catch).
		mk("kill-right-after-checkpoint", one(&Kill{}, 1, 30)),
		// A kill between checkpoints loses the steps since the last one, no more.
		mk("kill-between-checkpoints", one(&Kill{}, last, 25)),
		// Rank 0 serves nothing in these runs, but its death must not take the store along.
		mk("kill-rank-0", one(&Kill{}, 0, 17)),
		// A flipped bit on the wire must never become a parameter.
		mk("corrupt-frame-never-applied", one(&Corrupt{}, 1, 12)),
		// A duplicated frame must never be added twice.
		mk("duplicate-frame-never-applied-twice", one(&Duplicate{}, last, 21)),
		// A damaged newest checkpoint: fall back, never load it.
		mk("corrupt-newest-checkpoint", one(&CheckpointCorrupt{}, 1, 40)),
		mk("torn-newest-checkpoint", one(&TornWrite{}, 0, 30)),
		// Two faults in one attempt, then a kill while the group resumes.
		mk("hang-then-kill", one(&Hang{}, 1, 15), one(&Kill{}, 0, 35)),
	}
}
