package checkpoint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// FormatVersion is the manifest and rank-file format this package writes and reads.
const FormatVersion = 1

const (
	// maxManifestBytes bounds what ParseManifest (and the loader) reads.
	maxManifestBytes = 16 << 20
	// MaxWorld bounds the world size of a manifest so that a hostile one cannot make the
	// loader stat millions of files.
	MaxWorld = 1 << 16
)

// Manifest is the commit record of one checkpoint step, written by rank 0 after every rank's
// file is on disk.
type Manifest struct {
	Format  int       `json:"format"`
	Step    int       `json:"step"`
	World   int       `json:"world"`
	Layout  string    `json:"layout,omitempty"` // the Writer's Layout (how tensors are sharded), free-form
	Created time.Time `json:"created"`
	Files   []File    `json:"files"` // one per rank, in rank order
}

// File is one rank's file as rank 0 saw it at commit time.
type File struct {
	Rank   int    `json:"rank"`
	Name   string `json:"name"` // RankFileName(Rank), relative to the step folder
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"` // lowercase hex
}

// ParseManifest decodes and validates a manifest: one JSON object, known format, a file per
// rank named as RankFileName says, sizes >= 0, 64-hex-digit digests. Any failure is an
// E_CHECKPOINT error; it never panics.
func ParseManifest(data []byte) (*Manifest, error) {
	if len(data) > maxManifestBytes {
		return nil, errs.New(errs.Checkpoint, "manifest: %d bytes (limit %d)", len(data), maxManifestBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, errs.New(errs.Checkpoint, "manifest: not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errs.New(errs.Checkpoint, "manifest: trailing data after the JSON object")
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

func (m *Manifest) validate() error {
	bad := func(format string, args ...any) error {
		return errs.New(errs.Checkpoint, "manifest: "+format, args...)
	}
	if m.Format != FormatVersion {
		return bad("format %d (this build reads %d)", m.Format, FormatVersion)
	}
	if m.Step < 0 {
		return bad("negative step %d", m.Step)
	}
	if m.World < 1 || m.World > MaxWorld {
		return bad("world %d (want 1..%d)", m.World, MaxWorld)
	}
	if len(m.Files) != m.World {
		return bad("%d files for world %d", len(m.Files), m.World)
	}
	for i, f := range m.Files {
		if f.Rank != i || f.Name != RankFileName(i) {
			return bad("file %d is rank %d %q (want rank %d %q)", i, f.Rank, f.Name, i, RankFileName(i))
		}
		if f.Bytes < 0 {
			return bad("%s: negative size %d", f.Name, f.Bytes)
		}
		if !isHexDigest(f.SHA256) {
			return bad("%s: sha256 %q is not 64 lowercase hex digits", f.Name, f.SHA256)
		}
	}
	return nil
}

func isHexDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// encode renders the manifest as indented JSON with a final newline.
func (m *Manifest) encode() ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "step %d", m.Step)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, errs.New(errs.Internal, "manifest step %d: %v", m.Step, err)
	}
	return append(b, '\n'), nil
}

// String is a one-line summary for listings.
func (m *Manifest) String() string {
	var n int64
	for _, f := range m.Files {
		n += f.Bytes
	}
	return fmt.Sprintf("step %d, world %d, %d bytes, created %s", m.Step, m.World, n, m.Created.UTC().Format(time.RFC3339))
}
