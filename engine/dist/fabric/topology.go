// Package fabric models the links of a rack on one machine: a topology description (8-GPU
// nodes with NVLink inside and a network between, an NVL72-like domain of 72 ranks on one
// switch, racks of such domains) gives every pair of ranks a link with a latency, a bandwidth,
// jitter and loss and corruption rates, and a transport wrapper (Fabric.Wrap) makes every
// frame pay its link's cost while the real bytes move through the real transport below: no
// result is ever simulated. Time is real (the sender is held until the frame would have
// arrived) or virtual (a discrete-event clock per rank, advanced by the arrival stamps of the
// frames it receives, so 256 ranks over a slow fabric run as fast as the bytes move).
// Predict gives the model's time for each collective's algorithm, to print beside the
// measured one; Placement checks that a tensor-parallel group stays on fast links.
//
// Files: topology.go (the description and its links), fabric.go (the wrapper and clocks),
// faults.go (link faults: flapping, slow, congested switch, a corrupting NIC), predict.go (the
// model's times), placement.go (the --mesh check).
package fabric

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Class is the kind of link between two ranks.
type Class uint8

const (
	// Local links join ranks of one node or NVLink domain.
	Local Class = iota
	// Net links join nodes of one rack (the scale-out network, one NIC per rank).
	Net
	// Spine links join racks.
	Spine
	classLimit
)

var classNames = [...]string{Local: "nvlink", Net: "net", Spine: "spine"}

func (c Class) String() string {
	if c < classLimit {
		return classNames[c]
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// Link is one class of link's cost model.
type Link struct {
	Latency   time.Duration // per frame, from the end of its serialization to its arrival
	Bandwidth float64       // bytes per second of the sender's port for this class
	Jitter    time.Duration // each frame waits a further uniform [0, Jitter]
	Loss      float64       // probability a frame is lost once and resent (costs a resend timeout)
	Corrupt   float64       // probability a frame arrives with one bit flipped
}

// Topology places ranks on nodes and racks and says what each class of link costs.
type Topology struct {
	Spec     string
	World    int // ranks the description holds (0: any, domains of NodeSize)
	NodeSize int // ranks per node (NVLink domain)
	Nodes    int // nodes per rack (0: one rack holds every node)
	Links    [classLimit]Link
}

// Defaults of the link classes: an NVLink port of a Hopper/Blackwell GPU (900 GB/s a
// direction), a 400 Gb/s NIC per rank inside a rack (50 GB/s), the same through a spine
// between racks with more switch hops. Round numbers, not measurements of a machine.
var defaultLinks = [classLimit]Link{
	Local: {Latency: 2 * time.Microsecond, Bandwidth: 900e9},
	Net:   {Latency: 5 * time.Microsecond, Bandwidth: 50e9},
	Spine: {Latency: 10 * time.Microsecond, Bandwidth: 50e9},
}

// Parse reads a topology description:
//
//	nodes=GxL          G nodes of L ranks (world G*L): NVLink inside a node, the network between
//	racks=RxGxL        R racks of G nodes of L ranks: the spine between racks
//	nvl72              NVLink domains of 72 ranks (any world; ranks 72.. are further domains)
//	nvl72xR            R such domains, one per rack (world 72*R)
//
// followed by optional ,KEY=VALUE overrides of a class's numbers: nvl-lat, nvl-bw, net-lat,
// net-bw, spine-lat, spine-bw (durations like 5us; bandwidths in bytes/s with K, M, G
// suffixes: 50G), jitter (every class), loss and corrupt (probabilities, every class but
// nvlink). Errors are E_INPUT.
func Parse(spec string) (*Topology, error) {
	fields := strings.Split(strings.TrimSpace(spec), ",")
	t := &Topology{Spec: strings.TrimSpace(spec), Links: defaultLinks}
	bad := func(format string, a ...any) error {
		return errs.New(errs.Input, "topology %q: %s (want nodes=GxL, racks=RxGxL, nvl72 or nvl72xR, then ,key=value: nvl-lat nvl-bw net-lat net-bw spine-lat spine-bw jitter loss corrupt)", spec, fmt.Sprintf(format, a...))
	}
	head := fields[0]
	switch {
	case head == "nvl72":
		t.NodeSize = 72
	case strings.HasPrefix(head, "nvl72x"):
		r, err := posInt(strings.TrimPrefix(head, "nvl72x"))
		if err != nil {
			return nil, bad("%s", err)
		}
		t.NodeSize, t.Nodes, t.World = 72, 1, 72*r
	case strings.HasPrefix(head, "nodes="):
		d, err := dims(strings.TrimPrefix(head, "nodes="), 2)
		if err != nil {
			return nil, bad("%s", err)
		}
		t.NodeSize, t.World = d[1], d[0]*d[1]
	case strings.HasPrefix(head, "racks="):
		d, err := dims(strings.TrimPrefix(head, "racks="), 3)
		if err != nil {
			return nil, bad("%s", err)
		}
		t.Nodes, t.NodeSize, t.World = d[1], d[2], d[0]*d[1]*d[2]
	default:
		return nil, bad("unknown shape %q", head)
	}
	if t.World > 1<<16 {
		return nil, bad("%d ranks exceed the largest world, %d", t.World, 1<<16)
	}
	for _, kv := range fields[1:] {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, bad("%q is not key=value", kv)
		}
		if err := t.set(k, v); err != nil {
			return nil, bad("%s=%s: %s", k, v, err)
		}
	}
	return t, nil
}

func (t *Topology) set(k, v string) error {
	classOf := map[string]Class{"nvl": Local, "net": Net, "spine": Spine}
	if k == "jitter" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("want a duration >= 0")
		}
		for c := range t.Links {
			t.Links[c].Jitter = d
		}
		return nil
	}
	if k == "loss" || k == "corrupt" {
		p, err := strconv.ParseFloat(v, 64)
		if err != nil || p < 0 || p >= 1 {
			return fmt.Errorf("want a probability in [0, 1)")
		}
		for c := Net; c < classLimit; c++ {
			if k == "loss" {
				t.Links[c].Loss = p
			} else {
				t.Links[c].Corrupt = p
			}
		}
		return nil
	}
	name, what, ok := strings.Cut(k, "-")
	c, known := classOf[name]
	if !ok || !known {
		return fmt.Errorf("unknown key")
	}
	switch what {
	case "lat":
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("want a duration >= 0")
		}
		t.Links[c].Latency = d
	case "bw":
		b, err := bandwidth(v)
		if err != nil {
			return err
		}
		t.Links[c].Bandwidth = b
	default:
		return fmt.Errorf("unknown key")
	}
	return nil
}

func bandwidth(s string) (float64, error) {
	mult := 1.0
	t := strings.TrimSuffix(strings.TrimSuffix(s, "/s"), "B")
	if t != "" {
		switch t[len(t)-1] {
		case 'K', 'k':
			mult = 1e3
		case 'M', 'm':
			mult = 1e6
		case 'G', 'g':
			mult = 1e9
		case 'T', 't':
			mult = 1e12
		}
		if mult > 1 {
			t = t[:len(t)-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("want a bandwidth > 0 in bytes/s (50G)")
	}
	return v * mult, nil
}

func posInt(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 1<<16 {
		return 0, fmt.Errorf("%q is not a count 1..65536", s)
	}
	return n, nil
}

func dims(s string, k int) ([]int, error) {
	parts := strings.Split(s, "x")
	if len(parts) != k {
		return nil, fmt.Errorf("%q: want %d sizes joined by x", s, k)
	}
	out := make([]int, k)
	for i, p := range parts {
		n, err := posInt(p)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// For checks that the topology holds a world of n ranks (E_INPUT otherwise) and returns it
// sized to n (a description without a world size, nvl72, takes any).
func (t *Topology) For(n int) (*Topology, error) {
	if t.World != 0 && t.World != n {
		return nil, errs.New(errs.Input, "topology %s holds %d ranks, the world has %d", t.Spec, t.World, n)
	}
	c := *t
	c.World = n
	return &c, nil
}

// Node is rank r's node (NVLink domain); Rack its rack.
func (t *Topology) Node(r int) int { return r / t.NodeSize }
func (t *Topology) Rack(r int) int {
	if t.Nodes == 0 {
		return 0
	}
	return r / (t.NodeSize * t.Nodes)
}

// Class is the class of the link from rank a to rank b.
func (t *Topology) Class(a, b int) Class {
	switch {
	case t.Node(a) == t.Node(b):
		return Local
	case t.Rack(a) == t.Rack(b):
		return Net
	}
	return Spine
}

// Link is the cost model of the link from a to b.
func (t *Topology) Link(a, b int) Link { return t.Links[t.Class(a, b)] }

// HierNode is the node size a hierarchical all_reduce uses on this topology for world n: the
// node size when the world spans several whole nodes, 0 (the flat algorithm) otherwise.
func (t *Topology) HierNode(n int) int {
	if t.NodeSize > 1 && t.NodeSize < n && n%t.NodeSize == 0 {
		return t.NodeSize
	}
	return 0
}

// String describes the topology in one line.
func (t *Topology) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d ranks, nodes of %d", t.Spec, t.World, t.NodeSize)
	if t.Nodes > 0 {
		fmt.Fprintf(&b, ", racks of %d nodes", t.Nodes)
	}
	for c := Local; c < classLimit; c++ {
		l := t.Links[c]
		fmt.Fprintf(&b, "; %s %s %.0f GB/s", c, l.Latency, l.Bandwidth/1e9)
		if l.Jitter > 0 {
			fmt.Fprintf(&b, " jitter %s", l.Jitter)
		}
		if l.Loss > 0 || l.Corrupt > 0 {
			fmt.Fprintf(&b, " loss %g corrupt %g", l.Loss, l.Corrupt)
		}
	}
	return b.String()
}
