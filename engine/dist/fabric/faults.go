package fabric

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// FaultKind names a fault of the fabric.
type FaultKind string

const (
	// Flap takes the link between ranks A and B down for Down out of every Period of fabric
	// time: frames that reach a down link wait until it is up (a link-level retry), so a
	// flapping link is slow, never lossy.
	Flap FaultKind = "flap"
	// Slow divides the bandwidth of the link between A and B by Factor and multiplies its
	// latency by it.
	Slow FaultKind = "slow"
	// Congest slows every link through node A's switch (every link with an end on node A) by
	// Factor.
	Congest FaultKind = "congest"
	// Corrupt makes rank A's NIC flip one bit of every Every-th frame it sends.
	Corrupt FaultKind = "corrupt"
)

// Fault is one fault in force on a fabric.
type Fault struct {
	Kind         FaultKind
	A, B         int
	Factor       float64
	Period, Down time.Duration
	Every        int
}

func (f Fault) String() string {
	switch f.Kind {
	case Flap:
		return fmt.Sprintf("flap %d-%d down %s every %s", f.A, f.B, f.Down, f.Period)
	case Slow:
		return fmt.Sprintf("slow %d-%d x%g", f.A, f.B, f.Factor)
	case Congest:
		return fmt.Sprintf("congest node %d x%g", f.A, f.Factor)
	}
	return fmt.Sprintf("corrupt rank %d 1/%d", f.A, f.Every)
}

// Validate checks f against the fabric's world (E_INPUT).
func (f Fault) Validate(t *Topology) error {
	in := func(r int) bool { return r >= 0 && r < t.World }
	switch {
	case f.Kind == Flap && (!in(f.A) || !in(f.B) || f.A == f.B || f.Period <= 0 || f.Down <= 0 || f.Down >= f.Period):
		return errs.New(errs.Input, "fabric fault %s: want two ranks of the world and 0 < down < period", f)
	case f.Kind == Slow && (!in(f.A) || !in(f.B) || f.A == f.B || f.Factor < 1):
		return errs.New(errs.Input, "fabric fault %s: want two ranks of the world and a factor >= 1", f)
	case f.Kind == Congest && (f.A < 0 || f.A*t.NodeSize >= t.World || f.Factor < 1):
		return errs.New(errs.Input, "fabric fault %s: want a node of the world and a factor >= 1", f)
	case f.Kind == Corrupt && (!in(f.A) || f.Every < 1):
		return errs.New(errs.Input, "fabric fault %s: want a rank of the world and N >= 1", f)
	case f.Kind != Flap && f.Kind != Slow && f.Kind != Congest && f.Kind != Corrupt:
		return errs.New(errs.Input, "fabric fault %q: want flap, slow, congest or corrupt", f.Kind)
	}
	return nil
}

// SetFaults replaces the faults in force (nil: none).
func (f *Fabric) SetFaults(fs []Fault) error {
	for _, x := range fs {
		if err := x.Validate(f.topo); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append([]Fault(nil), fs...)
	return nil
}

// AddFault puts x in force beside the faults already in force and returns its undo (which
// removes this one only): a chaos fault that starts and heals while the job runs.
func (f *Fabric) AddFault(x Fault) (undo func(), err error) {
	if err := x.Validate(f.topo); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.faults = append(f.faults, x)
	f.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if i := slices.Index(f.faults, x); i >= 0 {
				f.faults = slices.Delete(f.faults, i, i+1)
			}
		})
	}, nil
}

func (x Fault) onLink(a, b int) bool { return (x.A == a && x.B == b) || (x.A == b && x.B == a) }

// effects is the slow-down of the link a->b and the corruption period of a's NIC (0: none).
// f.mu is held.
func (f *Fabric) effects(a, b int) (scale float64, every int) {
	scale = 1
	for _, x := range f.faults {
		switch x.Kind {
		case Slow:
			if x.onLink(a, b) {
				scale *= x.Factor
			}
		case Congest:
			if f.topo.Node(a) == x.A || f.topo.Node(b) == x.A {
				scale *= x.Factor
			}
		case Corrupt:
			if x.A == a {
				every = x.Every
			}
		}
	}
	return scale, every
}

// upAt is the first time >= t at which the link a->b is up. f.mu is held.
func (f *Fabric) upAt(a, b int, t time.Duration) time.Duration {
	for _, x := range f.faults {
		if x.Kind != Flap || !x.onLink(a, b) {
			continue
		}
		if ph := t % x.Period; ph < x.Down {
			t += x.Down - ph
		}
	}
	return t
}
