package report

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/tessera-qa/tessera-qa/report/store"
)

// ID is a short stable identifier of the series, safe in URLs and file names.
func (k SeriesKey) ID() string {
	h := sha256.Sum256([]byte(k.Benchmark + "\x00" + k.Device + "\x00" + k.DType + "\x00" + k.Shape))
	return hex.EncodeToString(h[:8])
}

// String is "benchmark device dtype shape" for people.
func (k SeriesKey) String() string {
	return strings.Join([]string{k.Benchmark, k.Device, k.DType, k.Shape}, " ")
}

func (k SeriesKey) store() store.SeriesKey {
	return store.SeriesKey{Benchmark: k.Benchmark, Device: k.Device, DType: k.DType, Shape: k.Shape}
}

func seriesKeyOf(k store.SeriesKey) SeriesKey {
	return SeriesKey{Benchmark: k.Benchmark, Device: k.Device, DType: k.DType, Shape: k.Shape}
}

// String is "suite|case|device class|determinism[|computation]", the target of a repro
// acknowledgement.
func (k ReproKey) String() string {
	s := k.Suite + "|" + k.Case + "|" + k.DeviceClass + "|" + k.Determinism
	if k.Computation != "" {
		s += "|" + k.Computation
	}
	return s
}

// ParseReproKey reads back a repro acknowledgement's target (ReproKey.String). ok is false
// for a string of another shape.
func ParseReproKey(target string) (k ReproKey, ok bool) {
	p := strings.Split(target, "|")
	if len(p) != 4 && len(p) != 5 {
		return ReproKey{}, false
	}
	k = ReproKey{Suite: p[0], Case: p[1], DeviceClass: p[2], Determinism: p[3]}
	if len(p) == 5 {
		k.Computation = p[4]
	}
	return k, k.Suite != "" && k.Case != "" && k.DeviceClass != ""
}

// Name is "suite/case", the matrix row.
func (k ReproKey) Name() string { return k.Suite + "/" + k.Case }

func reproKeyOf(k store.ReproKey) ReproKey {
	return ReproKey{Suite: k.Suite, Case: k.Case, DeviceClass: k.DeviceClass, Determinism: k.Determinism, Computation: k.Computation}
}

func (k ReproKey) store() store.ReproKey {
	return store.ReproKey{Suite: k.Suite, Case: k.Case, DeviceClass: k.DeviceClass, Determinism: k.Determinism, Computation: k.Computation}
}

func runRef(r store.RunRow) RunRef {
	return RunRef{ID: r.ID, Commit: r.Commit, Branch: r.Branch, Event: r.Event, Machine: r.Machine,
		DeviceClass: r.DeviceClass, Time: r.Started}
}

func ackOf(a store.AckRow) Ack {
	return Ack{ID: a.ID, Kind: a.Kind, Target: a.Target, Digest: a.Digest, RunID: a.RunID, Reason: a.Reason, By: a.By, Time: a.Created}
}

func itoa(i int) string { return strconv.Itoa(i) }

// shortDigest keeps enough of a digest to tell it apart in one line.
func shortDigest(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

// clip shortens a value quoted in an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
