package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist/fabric"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Fault is one kind of failure with its parameters as typed fields (the zero value of each
// field is a sensible default). Faults are values: a scenario lists them, the catalogue
// holds one of each kind.
type Fault interface {
	// Name is the fault's hierarchical kind: "rank/kill", "net/corrupt" ...
	Name() string
	// Site is where it acts: inside the rank process it names (SiteRank), in every rank
	// (SiteEveryRank), or in the agent that launched the ranks (SiteAgent).
	Site() Site
	// Available says whether it can act on this run: nil, or why not (an E_UNSUPPORTED line).
	Available(r Run) error
	// Expect says what must follow it in this run.
	Expect(r Run) Expect
	// Inject acts on t and returns when the fault is over (its undo, deferred inside, has
	// run) or ctx ends. It returns what it did, for the history. A fault that kills the
	// process it runs in does not return.
	Inject(ctx context.Context, t Target) (string, error)
}

// Site is where a fault acts.
type Site int

const (
	SiteRank      Site = iota // in the rank process named by the injection
	SiteEveryRank             // in every rank process (each does its side: a partition)
	SiteAgent                 // in the agent (launcher) that runs the named rank
)

// Run is what a fault needs to know about the run it is scheduled in.
type Run struct {
	Transport   string        // inproc or tcp
	World       int           //
	CommTimeout time.Duration // every collective's bound: a silence longer than this is detected
	Backend     string        // cpu or cuda
	Root        bool          // the agent may mount and signal (root)
	Containers  bool          // ranks are containers
	CheckEvery  int           // checkpoint interval
	// Topology is the modeled fabric the ranks train over (Scenario.Topology), nil for none.
	Topology *fabric.Topology
}

// Expect is what must follow a fault.
type Expect struct {
	// Detect lists the error codes that count as detecting the fault, on any rank. Empty: the
	// fault is one the job tolerates (it must still end with the fault-free run's bits).
	Detect []errs.Code
	// Fields, when set, are the frame header fields an E_DESYNC detection must name
	// (dist.DesyncField) to count: a corrupted payload is a crc error, and an E_DESYNC for
	// any other field would mean the receiver caught it by luck.
	Fields []string
	// Restart: detecting it fails the attempt, and the group must restart and resume.
	Restart bool
	// Suspects, for E_STRAGGLER: the ranks a detection may name (ExpectAt fills it: the
	// injection's rank, or the ranks on the slow path a fabric fault makes).
	Suspects []int
}

// ExpectAt is what must follow in's fault in run r, with its suspects.
func ExpectAt(in Injection, r Run) Expect {
	ex := in.Fault.Expect(r)
	ex.Suspects = []int{in.Rank}
	if s, ok := in.Fault.(suspecter); ok {
		ex.Suspects = s.suspects(r, in.Rank)
	}
	return ex
}

// Target is what a fault acts on where it runs.
type Target interface {
	// Rank is the rank the injection names; Self the rank of this process (-1 in the agent).
	Rank() int
	Self() int
	World() int
	// Run is the run the fault is in.
	Run() Run
	// Signal sends sig to the named rank's process (in a rank process: only to itself).
	Signal(rank int, sig Signal) error
	// Tap is this rank's hook on its outgoing frames (nil in the agent).
	Tap() *Tap
	// CheckpointDir is the run's checkpoint folder.
	CheckpointDir() string
	// LastStep is the last step the named rank applied (as far as this process knows), and
	// LastCheckpoint the newest checkpoint it saw committed.
	LastStep() int
	LastCheckpoint() int
	// Store restarts the rendezvous store (nil where this process does not serve it).
	Store() StoreControl
	// Nodes controls the rank containers (nil unless ranks are containers).
	Nodes() NodeControl
	// Fabric is the modeled fabric the rank's frames go over (nil without a topology).
	Fabric() FabricControl
}

// Signal is a signal number (syscall.Signal on unix).
type Signal int

// StoreControl restarts the rendezvous store served by the agent.
type StoreControl interface {
	Restart(ctx context.Context, down time.Duration) error
}

// NodeControl acts on the containers that run the ranks.
type NodeControl interface {
	Kill(ctx context.Context, rank int) error
	Pause(ctx context.Context, rank int) error
	Unpause(ctx context.Context, rank int) error
	Disconnect(ctx context.Context, rank int) error
	Connect(ctx context.Context, rank int) error
}

// Injection is one fault of a scenario: which, where and when. The fault acts once in the
// whole run, the first time rank Rank has applied step Step (in whatever attempt that is).
type Injection struct {
	ID    string `json:"id"`
	Fault Fault  `json:"-"`
	Rank  int    `json:"rank"`
	Step  int    `json:"step"`
}

type injectionJSON struct {
	ID     string          `json:"id"`
	Name   string          `json:"fault"`
	Rank   int             `json:"rank"`
	Step   int             `json:"step"`
	Params json.RawMessage `json:"params,omitempty"`
}

func (in Injection) MarshalJSON() ([]byte, error) {
	p, err := json.Marshal(in.Fault)
	if err != nil {
		return nil, err
	}
	if string(p) == "{}" {
		p = nil
	}
	return json.Marshal(injectionJSON{ID: in.ID, Name: in.Fault.Name(), Rank: in.Rank, Step: in.Step, Params: p})
}

func (in *Injection) UnmarshalJSON(b []byte) error {
	var j injectionJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	f, err := NewFault(j.Name)
	if err != nil {
		return err
	}
	if len(j.Params) > 0 {
		if err := json.Unmarshal(j.Params, f); err != nil {
			return errs.New(errs.Input, "chaos: fault %s: parameters %s: %v", j.Name, j.Params, err)
		}
	}
	*in = Injection{ID: j.ID, Fault: f, Rank: j.Rank, Step: j.Step}
	return nil
}

func (in Injection) String() string {
	return fmt.Sprintf("%s %s rank %d step %d", in.ID, in.Fault.Name(), in.Rank, in.Step)
}

// Catalogue is one fault of every kind with default parameters, in a fixed order.
func Catalogue() []Fault {
	return []Fault{
		&Kill{}, &Hang{}, &Slow{},
		&Partition{}, &Drop{}, &Corrupt{}, &Duplicate{}, &Delay{},
		&NaN{}, &IllegalAddress{}, &OOM{},
		&CheckpointCorrupt{}, &TornWrite{}, &DiskFull{},
		&StoreRestart{},
		&NodeKill{}, &NodePause{}, &NodeDisconnect{},
		&FabricFlap{}, &FabricSlow{}, &FabricCongest{}, &FabricCorrupt{},
	}
}

// Names lists the catalogue's kinds.
func Names() []string {
	var out []string
	for _, f := range Catalogue() {
		out = append(out, f.Name())
	}
	return out
}

// NewFault returns a fresh fault of kind name with default parameters (a pointer, so that
// parameters can be decoded into it).
func NewFault(name string) (Fault, error) {
	for _, f := range Catalogue() {
		if f.Name() == name {
			return f, nil
		}
	}
	return nil, errs.New(errs.Input, "chaos: unknown fault %q (have %s)", name, strings.Join(Names(), ", "))
}

func unsupported(format string, args ...any) error {
	return errs.New(errs.Unsupported, format, args...)
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func codes(cs ...errs.Code) []errs.Code { return slices.Clone(cs) }
