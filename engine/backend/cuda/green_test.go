package cuda

import "testing"

// The CUdevResource layout read by offset (cuda.h, CUDA 12.4 to 13): 144 bytes, smCount at 96.
func TestSMResourceLayout(t *testing.T) {
	var r SMResource
	r[smCountOffset] = 132
	r[smCountOffset+1] = 1 // 132 + 256
	if r.SMCount() != 388 || len(r) != 144 || smCountOffset != 96 {
		t.Errorf("SM resource layout: SMCount %d, size %d, offset %d", r.SMCount(), len(r), smCountOffset)
	}
}

// A placement names itself in the owner's error messages; the whole device adds nothing.
func TestPlacementNames(t *testing.T) {
	if got := (Placement{SMs: 32, Lane: 2}).String(); got != " partition 32 SMs lane 2" {
		t.Errorf("placement %q", got)
	}
	if got := (Placement{}).String(); got != "" {
		t.Errorf("whole device placement %q", got)
	}
}
