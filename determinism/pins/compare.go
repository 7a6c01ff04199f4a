package pins

import (
	"maps"
	"slices"
)

// Change is one case whose digests differ from its pin.
type Change struct {
	Case   string   `json:"case"`
	Pinned []string `json:"pinned"`
	Got    []string `json:"got"`
}

// PinnedDigest and GotDigest are the combined digests, as the results store and acks name them.
func (c Change) PinnedDigest() string { return Pin{Outputs: c.Pinned}.Digest() }
func (c Change) GotDigest() string    { return Pin{Outputs: c.Got}.Digest() }

// Diff is what changed between a pin file and a run, every list sorted by case name.
type Diff struct {
	Changed []Change `json:"changed"`
	// Added: cases the run has and the file does not pin (a new catalogue case).
	Added []string `json:"added"`
	// Missing: cases the file pins and the run did not produce (a case renamed or removed).
	Missing []string `json:"missing"`
	// Same counts the cases whose digests equal their pin.
	Same int `json:"same"`
}

// Empty reports whether the run matches the file exactly.
func (d Diff) Empty() bool { return len(d.Changed) == 0 && len(d.Added) == 0 && len(d.Missing) == 0 }

// Compare lists every case of got (case name -> output digests) whose digests differ from
// f's pin, every case f does not pin and every pin got lacks.
func Compare(f File, got map[string][]string) Diff {
	d := Diff{Changed: []Change{}, Added: []string{}, Missing: []string{}}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		p, ok := f.Cases[name]
		switch {
		case !ok:
			d.Added = append(d.Added, name)
		case !slices.Equal(p.Outputs, got[name]):
			d.Changed = append(d.Changed, Change{Case: name, Pinned: slices.Clone(p.Outputs), Got: slices.Clone(got[name])})
		default:
			d.Same++
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.Cases)) {
		if _, ok := got[name]; !ok {
			d.Missing = append(d.Missing, name)
		}
	}
	return d
}
