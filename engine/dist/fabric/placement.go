package fabric

import (
	"fmt"

	"github.com/tessera-qa/tessera-qa/engine/dist/mesh"
)

// Placement checks how a mesh's groups lie on the topology: a group along one of the slowest
// axes' names (tp: tensor parallelism, which talks every layer) whose ranks are not all on
// one node crosses a network link, which the performance guide says to avoid. It returns one
// warning per such axis (naming the first crossing group and how many cross), none when every
// such group stays on NVLink. The mesh's rank order is the placement (rank r runs on the
// topology's rank r). E_INPUT when the mesh and the topology disagree on the world.
func Placement(t *Topology, m *mesh.Mesh, axes ...string) ([]string, error) {
	if len(axes) == 0 {
		axes = []string{"tp"}
	}
	tp, err := t.For(m.World())
	if err != nil {
		return nil, err
	}
	var warns []string
	for _, ax := range axes {
		if m.AxisIndex(ax) < 0 {
			continue
		}
		seen := map[uint32]bool{}
		crossing, groups := 0, 0
		first := ""
		for r := range m.World() {
			id := m.GroupID(ax, r)
			if seen[id] {
				continue
			}
			seen[id] = true
			groups++
			g := m.Group(ax, r)
			worst := Local
			for _, q := range g[1:] {
				worst = max(worst, tp.Class(g[0], q))
			}
			if worst != Local {
				crossing++
				if first == "" {
					first = fmt.Sprintf("%v (over %s)", g, worst)
				}
			}
		}
		if crossing > 0 {
			warns = append(warns, fmt.Sprintf("mesh %s on %s: %d of %d %s groups cross a slow link, first %s: keep %s=%d inside a node of %d (or reorder the axes so %s is innermost)",
				m, t.Spec, crossing, groups, ax, first, ax, m.Size(ax), tp.NodeSize, ax))
		}
	}
	return warns, nil
}
