// Package pins keeps the output digests of the golden catalogue pinned per device class, so
// that a change of the engine's bits is caught even when every run agrees with itself (the
// determinism suite's other specs only compare runs with each other). A reduction folded in
// another order gives other bits on every run alike; only a pinned digest tells.
//
// The pin files live in golden/pins, one per device class (FileName), embedded by package
// golden (golden.Pins) so that a test binary copied to a GPU machine carries them. The format
// is docs/determinism.md's; Marshal writes it sorted, so a refresh diffs case by case.
//
// Index, one concern per file:
//
//	file.go     File, Pin, Accepted: the format; Parse (every field checked, E_INPUT), Marshal,
//	            FileName, Load, Save
//	compare.go  Compare, Diff, Change: every case whose digests changed, was added or is missing
//	accept.go   Ack, Refresh, AckCommand: a changed pin is rewritten only when an
//	            acknowledgement (`tessera-qa report ack repro`) names its new digest
//	record.go   Record: the catalogue's digests on one backend, with a harness.Result per case
//	            for the results store
//
// A refresh (what `tessera-qa determinism pin` does):
//
//	rec, _ := pins.Record(golden.Catalogue(), b)
//	old, ok, _ := pins.Load(os.DirFS("golden/pins"), "golden/pins", rec.DeviceClass)
//	f, diff, err := pins.Refresh(old, ok, rec, acks) // E_NONDETERMINISTIC: a change no ack covers
//	pins.Save("golden/pins", f)
package pins
