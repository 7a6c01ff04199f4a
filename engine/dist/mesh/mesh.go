package mesh

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// Limits keep a hostile mesh string from describing absurd worlds.
const (
	MaxAxes  = 8
	MaxWorld = 1 << 16
)

// GroupIDBase is the first communicator id GroupID hands out. Ids below it are free for the
// world communicator (0) and for communicators made by hand.
const GroupIDBase = 1 << 20

// Axis is one named mesh dimension.
type Axis struct {
	Name string
	Size int
}

// Mesh is a logical device grid: axes in order (the last varies fastest over ranks) and one
// device descriptor per rank. Treat a Mesh as immutable once built.
type Mesh struct {
	Axes    []Axis
	Devices []string
}

var axisNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,31}$`)

// ValidAxisName reports whether s can name a mesh axis: an identifier of at most 32 bytes
// (no '.', so an axis name never collides with the text format's value names or a layout).
func ValidAxisName(s string) bool { return axisNameRE.MatchString(s) }

// New validates axes and devices and returns the mesh. nil devices mean cpu:0..world-1.
func New(axes []Axis, devices []string) (*Mesh, error) {
	if len(axes) == 0 {
		return nil, errs.New(errs.Input, "mesh has no axes (write e.g. dp=2,tp=2)")
	}
	if len(axes) > MaxAxes {
		return nil, errs.New(errs.Input, "mesh has %d axes, limit %d", len(axes), MaxAxes)
	}
	world := 1
	for i, a := range axes {
		if !ValidAxisName(a.Name) {
			return nil, errs.New(errs.Input, "mesh axis %d: name %q is not an identifier ([A-Za-z_][A-Za-z0-9_]*, at most 32 bytes)", i, a.Name)
		}
		if slices.ContainsFunc(axes[:i], func(b Axis) bool { return b.Name == a.Name }) {
			return nil, errs.New(errs.Input, "mesh axis %s is named twice", a.Name)
		}
		if a.Size < 1 || a.Size > MaxWorld {
			return nil, errs.New(errs.Input, "mesh axis %s has size %d, want 1..%d", a.Name, a.Size, MaxWorld)
		}
		if world > MaxWorld/a.Size {
			return nil, errs.New(errs.Input, "mesh %s has more than %d ranks", formatAxes(axes), MaxWorld)
		}
		world *= a.Size
	}
	m := &Mesh{Axes: slices.Clone(axes)}
	if devices == nil {
		m.Devices = make([]string, world)
		for r := range m.Devices {
			m.Devices[r] = "cpu:" + strconv.Itoa(r)
		}
		return m, nil
	}
	if len(devices) != world {
		return nil, errs.New(errs.Input, "mesh %s has %d ranks but %d devices are listed", formatAxes(axes), world, len(devices))
	}
	for r, d := range devices {
		if err := CheckDevice(d); err != nil {
			return nil, errs.Wrap(errs.Input, err, "mesh %s: rank %d", formatAxes(axes), r)
		}
	}
	m.Devices = slices.Clone(devices)
	return m, nil
}

// ParseMesh reads "dp=2,tp=2" (axis=size, comma-separated, spaces allowed around tokens).
// Every error is one E_PARSE or E_INPUT line quoting the string.
func ParseMesh(s string) (*Mesh, error) {
	src := s
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errs.New(errs.Parse, "mesh %q is empty (write e.g. dp=2,tp=2)", src)
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxAxes {
		return nil, errs.New(errs.Input, "mesh %q has %d axes, limit %d", src, len(parts), MaxAxes)
	}
	axes := make([]Axis, 0, len(parts))
	for i, p := range parts {
		name, size, ok := strings.Cut(p, "=")
		name, size = strings.TrimSpace(name), strings.TrimSpace(size)
		if !ok || name == "" || size == "" {
			return nil, errs.New(errs.Parse, "mesh %q: item %d (%q) is not axis=size", src, i+1, strings.TrimSpace(p))
		}
		if !ValidAxisName(name) {
			return nil, errs.New(errs.Parse, "mesh %q: axis name %q is not an identifier ([A-Za-z_][A-Za-z0-9_]*, at most 32 bytes)", src, name)
		}
		n, err := strconv.Atoi(size)
		if err != nil || n < 1 || n > MaxWorld || size[0] == '+' {
			return nil, errs.New(errs.Parse, "mesh %q: axis %s has size %q, want an integer 1..%d", src, name, size, MaxWorld)
		}
		axes = append(axes, Axis{Name: name, Size: n})
	}
	m, err := New(axes, nil)
	if err != nil {
		return nil, errs.Wrap(errs.Input, err, "mesh %q", src)
	}
	return m, nil
}

// String renders the axes the way ParseMesh reads them: "dp=2,tp=2". Devices are not part of
// it (they say where a mesh runs, not what a program computes).
func (m *Mesh) String() string {
	if m == nil {
		return ""
	}
	return formatAxes(m.Axes)
}

func formatAxes(axes []Axis) string {
	parts := make([]string, len(axes))
	for i, a := range axes {
		parts[i] = a.Name + "=" + strconv.Itoa(a.Size)
	}
	return strings.Join(parts, ",")
}

// SameAxes reports whether two meshes have the same axes in the same order (devices aside).
func SameAxes(a, b *Mesh) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.Axes, b.Axes)
}

// World is the number of ranks: the product of the axis sizes.
func (m *Mesh) World() int {
	w := 1
	for _, a := range m.Axes {
		w *= a.Size
	}
	return w
}

// AxisIndex returns the position of the named axis, or -1.
func (m *Mesh) AxisIndex(name string) int {
	return slices.IndexFunc(m.Axes, func(a Axis) bool { return a.Name == name })
}

// Size returns the named axis' size, or 0 when the mesh has no such axis.
func (m *Mesh) Size(axis string) int {
	if i := m.AxisIndex(axis); i >= 0 {
		return m.Axes[i].Size
	}
	return 0
}

// CheckAxis returns an E_INPUT error when the mesh has no axis of that name.
func (m *Mesh) CheckAxis(axis string) error {
	if m.AxisIndex(axis) < 0 {
		return errs.New(errs.Input, "mesh %s has no axis %q", m, axis)
	}
	return nil
}

// Coords returns the rank's coordinate on every axis (row-major: the last axis varies fastest).
func (m *Mesh) Coords(rank int) []int {
	c := make([]int, len(m.Axes))
	for i := len(m.Axes) - 1; i >= 0; i-- {
		c[i] = rank % m.Axes[i].Size
		rank /= m.Axes[i].Size
	}
	return c
}

// Coord returns the rank's coordinate on one axis (0 for an unknown axis).
func (m *Mesh) Coord(axis string, rank int) int {
	i := m.AxisIndex(axis)
	if i < 0 {
		return 0
	}
	return m.Coords(rank)[i]
}

// Rank is the inverse of Coords.
func (m *Mesh) Rank(coords []int) int {
	r := 0
	for i, a := range m.Axes {
		r = r*a.Size + coords[i]
	}
	return r
}

// CoordString renders a rank's coordinates: "dp=1,tp=0".
func (m *Mesh) CoordString(rank int) string {
	c := m.Coords(rank)
	parts := make([]string, len(c))
	for i, a := range m.Axes {
		parts[i] = a.Name + "=" + strconv.Itoa(c[i])
	}
	return strings.Join(parts, ",")
}

// Group returns the world ranks that share every coordinate with rank except the one on axis,
// ordered by their coordinate on axis: the members of the rank's communicator along axis.
// Member i of the group sits at coordinate i, so a collective's rank order is the axis order.
func (m *Mesh) Group(axis string, rank int) []int {
	i := m.AxisIndex(axis)
	if i < 0 {
		return nil
	}
	c := m.Coords(rank)
	out := make([]int, m.Axes[i].Size)
	for k := range out {
		c[i] = k
		out[k] = m.Rank(c)
	}
	return out
}

// GroupID is the communicator id of rank's group along axis: the same on every member,
// different for every other (axis, group) of the mesh, and >= GroupIDBase. It is
// GroupIDBase + axisIndex*World + (the group's lowest rank): groups along one axis are
// disjoint, so their lowest ranks differ.
func (m *Mesh) GroupID(axis string, rank int) uint32 {
	i := m.AxisIndex(axis)
	if i < 0 {
		return 0
	}
	return uint32(GroupIDBase + i*m.World() + m.Group(axis, rank)[0])
}

var deviceRE = regexp.MustCompile(`^(cpu|cuda):(0|[1-9][0-9]{0,3})(/sm:(0|[1-9][0-9]{0,3})-(0|[1-9][0-9]{0,3}))?$|^MIG-[0-9A-Fa-f-]{8,64}$`)

// CheckDevice accepts the device descriptors a mesh may name: cpu:N, cuda:N, an SM partition
// of a GPU (cuda:N/sm:A-B, inclusive SM range from a green-context split) and MIG instances by
// UUID (MIG-<hex and dashes>). Several ranks may name one device (ranks sharing one GPU).
func CheckDevice(d string) error {
	if !deviceRE.MatchString(d) {
		return errs.New(errs.Input, "device %q is not cpu:N, cuda:N, cuda:N/sm:A-B or MIG-<uuid>", d)
	}
	if _, rng, ok := strings.Cut(d, "/sm:"); ok {
		a, b, _ := strings.Cut(rng, "-")
		lo, _ := strconv.Atoi(a)
		hi, _ := strconv.Atoi(b)
		if lo > hi {
			return errs.New(errs.Input, "device %q: SM range %d-%d is empty", d, lo, hi)
		}
	}
	return nil
}

// WithDevices returns a copy of the mesh on the listed devices (one per rank).
func (m *Mesh) WithDevices(devices []string) (*Mesh, error) {
	if devices == nil {
		return nil, errs.New(errs.Input, "mesh %s: no devices listed", m)
	}
	return New(m.Axes, devices)
}
