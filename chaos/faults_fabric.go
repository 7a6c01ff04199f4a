package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist/fabric"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// The fabric/* faults act on the modeled fabric a run with a topology trains over
// (Scenario.Topology, engine/dist/fabric): the real frames of the real transport pay a slowed
// link's cost or arrive with a bit flipped by a NIC. The slow ones change no result and no
// rank's compute, only how late frames come: the straggler watch must name the ranks on the
// slow path from the ranks' per-peer waits (E_STRAGGLER, Field "wait"). A corrupting NIC
// must be refused by the receiver's CRC (E_DESYNC naming crc) and the group restart.

// FabricControl is the fabric a rank's fault acts on: Add puts a fault in force (the undo
// removes it), Stats counts what went over the links.
type FabricControl interface {
	Add(fabric.Fault) (undo func(), err error)
	Stats() fabric.Stats
}

// Defaults of the fabric faults.
const (
	// fabricSteps: how many steps a slow fault lasts: windows enough for the watch's strikes.
	fabricSteps = 3 * stragglerWindow
	// fabricHold bounds how long a fault waits for its steps or its corrupted frame.
	fabricHold = 2 * time.Minute
)

// rankChecker is a fault whose parameters must be checked against the rank it is injected
// in and the run's topology (E_INPUT): Scenario.Normalize calls it.
type rankChecker interface {
	checkAt(r Run, rank int) error
}

// suspecter is a fault that makes other ranks than the injection's look slow: the straggler
// detections that count as finding it are those naming one of these.
type suspecter interface {
	suspects(r Run, rank int) []int
}

func fabricAvailable(name string, r Run) error {
	if r.Topology == nil {
		return unsupported("%s: this run has no modeled fabric (give --topology with --transport inproc)", name)
	}
	return netAvailable(name, r)
}

// peerOf is a link fault's other end: Peer, or by default the rank's counterpart on the next
// node (a network link), or its neighbour when the world is one node.
func peerOf(peer *int, r Run, rank int) int {
	if peer != nil {
		return *peer
	}
	if t := r.Topology; t != nil && t.NodeSize < r.World {
		return (rank + t.NodeSize) % r.World
	}
	return (rank + 1) % max(r.World, 1)
}

func steps(n int) int {
	if n <= 0 {
		return fabricSteps
	}
	return n
}

// holdSteps keeps a fault in force until the rank has applied n more steps, the attempt ends
// (ctx) or fabricHold passes; it returns the steps it held for.
func holdSteps(ctx context.Context, t Target, n int) (int, error) {
	from := t.LastStep()
	deadline := time.NewTimer(fabricHold)
	defer deadline.Stop()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		if s := t.LastStep(); s-from >= n {
			return s - from, nil
		}
		select {
		case <-ctx.Done():
			return t.LastStep() - from, nil // the group restarts or the job ended: healed
		case <-deadline.C:
			return t.LastStep() - from, fmt.Errorf("%d steps did not come within %s", n, fabricHold)
		case <-tick.C:
		}
	}
}

// injectSlow puts x in force for n steps of the rank.
func injectSlow(ctx context.Context, t Target, x fabric.Fault, n int) (string, error) {
	fc := t.Fabric()
	if fc == nil {
		return "", fmt.Errorf("no fabric to act on")
	}
	undo, err := fc.Add(x)
	if err != nil {
		return "", err
	}
	defer undo()
	held, err := holdSteps(ctx, t, n)
	return fmt.Sprintf("%s for %d steps", x, held), err
}

var slowExpect = Expect{Detect: []errs.Code{errs.Straggler}, Fields: []string{stragglerWait}}

// FabricFlap is fabric/flap: the link between the rank and Peer goes down for Down out of
// every Period of fabric time, for Steps steps; frames wait for it to come back up.
type FabricFlap struct {
	Peer   *int     `json:"peer,omitempty"`
	Period Duration `json:"period,omitempty"` // default 200us
	Down   Duration `json:"down,omitempty"`   // default 150us
	Steps  int      `json:"steps,omitempty"`
}

func (*FabricFlap) Name() string          { return "fabric/flap" }
func (*FabricFlap) Site() Site            { return SiteRank }
func (*FabricFlap) Available(r Run) error { return fabricAvailable("fabric/flap", r) }
func (*FabricFlap) Expect(Run) Expect     { return slowExpect }
func (f *FabricFlap) fault(r Run, rank int) fabric.Fault {
	p, d := time.Duration(f.Period), time.Duration(f.Down)
	if p <= 0 {
		p = 200 * time.Microsecond
	}
	if d <= 0 {
		d = p * 3 / 4
	}
	return fabric.Fault{Kind: fabric.Flap, A: rank, B: peerOf(f.Peer, r, rank), Period: p, Down: d}
}
func (f *FabricFlap) checkAt(r Run, rank int) error {
	return checkFabric(f.Name(), f.fault(r, rank), r)
}
func (f *FabricFlap) suspects(r Run, rank int) []int {
	x := f.fault(r, rank)
	return []int{x.A, x.B}
}
func (f *FabricFlap) Inject(ctx context.Context, t Target) (string, error) {
	return injectSlow(ctx, t, f.fault(t.Run(), t.Rank()), steps(f.Steps))
}

// FabricSlow is fabric/slow-link: the link between the rank and Peer has its bandwidth
// divided and its latency multiplied by Factor (default 20) for Steps steps.
type FabricSlow struct {
	Peer   *int    `json:"peer,omitempty"`
	Factor float64 `json:"factor,omitempty"`
	Steps  int     `json:"steps,omitempty"`
}

func (*FabricSlow) Name() string          { return "fabric/slow-link" }
func (*FabricSlow) Site() Site            { return SiteRank }
func (*FabricSlow) Available(r Run) error { return fabricAvailable("fabric/slow-link", r) }
func (*FabricSlow) Expect(Run) Expect     { return slowExpect }
func (f *FabricSlow) fault(r Run, rank int) fabric.Fault {
	k := f.Factor
	if k == 0 {
		k = 20
	}
	return fabric.Fault{Kind: fabric.Slow, A: rank, B: peerOf(f.Peer, r, rank), Factor: k}
}
func (f *FabricSlow) checkAt(r Run, rank int) error {
	return checkFabric(f.Name(), f.fault(r, rank), r)
}
func (f *FabricSlow) suspects(r Run, rank int) []int {
	x := f.fault(r, rank)
	return []int{x.A, x.B}
}
func (f *FabricSlow) Inject(ctx context.Context, t Target) (string, error) {
	return injectSlow(ctx, t, f.fault(t.Run(), t.Rank()), steps(f.Steps))
}

// FabricCongest is fabric/congest: node Node's switch (default: the rank's node) is
// congested, every link with an end on the node slowed by Factor (default 8), for Steps steps.
type FabricCongest struct {
	Node   *int    `json:"node,omitempty"`
	Factor float64 `json:"factor,omitempty"`
	Steps  int     `json:"steps,omitempty"`
}

func (*FabricCongest) Name() string          { return "fabric/congest" }
func (*FabricCongest) Site() Site            { return SiteRank }
func (*FabricCongest) Available(r Run) error { return fabricAvailable("fabric/congest", r) }
func (*FabricCongest) Expect(Run) Expect     { return slowExpect }
func (f *FabricCongest) fault(r Run, rank int) fabric.Fault {
	k := f.Factor
	if k == 0 {
		k = 8
	}
	node := 0
	switch {
	case f.Node != nil:
		node = *f.Node
	case r.Topology != nil:
		node = r.Topology.Node(rank)
	}
	return fabric.Fault{Kind: fabric.Congest, A: node, Factor: k}
}
func (f *FabricCongest) checkAt(r Run, rank int) error {
	return checkFabric(f.Name(), f.fault(r, rank), r)
}
func (f *FabricCongest) suspects(r Run, rank int) []int {
	if r.Topology == nil {
		return []int{rank}
	}
	node := f.fault(r, rank).A
	var out []int
	for q := range r.World {
		if r.Topology.Node(q) == node {
			out = append(out, q)
		}
	}
	return out
}
func (f *FabricCongest) Inject(ctx context.Context, t Target) (string, error) {
	return injectSlow(ctx, t, f.fault(t.Run(), t.Rank()), steps(f.Steps))
}

// FabricCorrupt is fabric/corrupt-nic: the rank's NIC flips one bit of every Every-th frame
// it sends (default 64) until the group restarts. The receiver's CRC32C check must refuse
// the frame (E_DESYNC naming crc) and the group resume from the newest checkpoint.
type FabricCorrupt struct {
	Every int `json:"every,omitempty"`
}

func (*FabricCorrupt) Name() string          { return "fabric/corrupt-nic" }
func (*FabricCorrupt) Site() Site            { return SiteRank }
func (*FabricCorrupt) Available(r Run) error { return fabricAvailable("fabric/corrupt-nic", r) }
func (*FabricCorrupt) Expect(Run) Expect {
	return Expect{Detect: codes(errs.Desync), Fields: []string{"crc"}, Restart: true}
}
func (f *FabricCorrupt) fault(rank int) fabric.Fault {
	n := f.Every
	if n == 0 {
		n = 64
	}
	return fabric.Fault{Kind: fabric.Corrupt, A: rank, Every: n}
}
func (f *FabricCorrupt) checkAt(r Run, rank int) error {
	return checkFabric(f.Name(), f.fault(rank), r)
}
func (f *FabricCorrupt) Inject(ctx context.Context, t Target) (string, error) {
	fc := t.Fabric()
	if fc == nil {
		return "", fmt.Errorf("no fabric to act on")
	}
	x := f.fault(t.Rank())
	before := fc.Stats().Corrupted
	undo, err := fc.Add(x)
	if err != nil {
		return "", err
	}
	defer undo()
	tm := time.NewTimer(fabricHold)
	defer tm.Stop()
	select {
	case <-ctx.Done(): // the group restarts: a new NIC
	case <-tm.C:
	}
	n := fc.Stats().Corrupted - before
	if n == 0 {
		return "", fmt.Errorf("%s: no frame was corrupted", x)
	}
	return fmt.Sprintf("%s: %d frame(s) corrupted", x, n), nil
}

// checkFabric is a fabric fault's E_INPUT when it names a rank or node outside the topology.
func checkFabric(name string, x fabric.Fault, r Run) error {
	if r.Topology == nil {
		return nil // Available says why it cannot act
	}
	if err := x.Validate(r.Topology); err != nil {
		return errs.Wrap(errs.Input, err, "chaos: %s", name)
	}
	return nil
}
