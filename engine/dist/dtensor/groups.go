package dtensor

import (
	"sync"

	"github.com/tessera-qa/tessera-qa/engine/dist"
	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Groups is one rank's view of a mesh: its world communicator and, made on first use, one
// sub-communicator per axis over mesh.Group(axis, rank) with id mesh.GroupID, so member i of
// each is the rank at coordinate i and every member agrees on the id without talking.
type Groups struct {
	Mesh  *mesh.Mesh
	World *dist.Comm

	mu   sync.Mutex
	axes map[string]*dist.Comm
}

// NewGroups checks that the communicator's world is the mesh's.
func NewGroups(m *mesh.Mesh, world *dist.Comm) (*Groups, error) {
	if world.World() != m.World() {
		return nil, errs.New(errs.Input, "mesh %s has %d ranks, the communicator %d", m, m.World(), world.World())
	}
	return &Groups{Mesh: m, World: world, axes: map[string]*dist.Comm{}}, nil
}

// Rank is this rank's world rank.
func (g *Groups) Rank() int { return g.World.Rank() }

// Axis returns the communicator along axis.
func (g *Groups) Axis(axis string) (*dist.Comm, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.axes[axis]; ok {
		return c, nil
	}
	if err := g.Mesh.CheckAxis(axis); err != nil {
		return nil, err
	}
	r := g.World.Rank()
	c, err := g.World.Sub(g.Mesh.GroupID(axis, r), g.Mesh.Group(axis, r))
	if err != nil {
		return nil, err
	}
	g.axes[axis] = c
	return c, nil
}
