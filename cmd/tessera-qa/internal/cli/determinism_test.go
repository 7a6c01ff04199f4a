package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/determinism/pins"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/golden"
)

// pinFew points `determinism pin` at a few catalogue specs for the test's duration.
func pinFew(t *testing.T, names ...string) {
	t.Helper()
	var specs []golden.Spec
	for _, s := range golden.Catalogue() {
		if slices.Contains(names, s.Name) {
			specs = append(specs, s)
		}
	}
	if len(specs) != len(names) {
		t.Fatalf("found %d of the specs %v", len(specs), names)
	}
	old := pinSpecs
	pinSpecs = func() []golden.Spec { return specs }
	t.Cleanup(func() { pinSpecs = old })
}

// The life of a pin: recorded; a change of its bits refused, with the ack command printed;
// accepted once `report ack repro` names the new digest, with the reason in the file; then
// unchanged.
func TestDeterminismPinRefusesAChangeUntilAcknowledged(t *testing.T) {
	const name = "reduce_sum/f32/3x1031-axis1"
	pinFew(t, name, "add/f32/1031")
	dir := t.TempDir()
	out, db := filepath.Join(dir, "pins"), filepath.Join(dir, "h.db")
	cpu, _ := backend.Get("cpu")
	class := cpu.DeviceClass()

	o := cli(t, "determinism", "pin", "--backend", "cpu", "--out", out, "--db", db)
	o.want(t, ExitOK, "")
	if !strings.Contains(o.stdout, "written") {
		t.Fatalf("first pin wrote nothing:\n%s", o.stdout)
	}
	f, ok, err := pins.Load(os.DirFS(out), out, class)
	if err != nil || !ok || len(f.Cases) != 2 {
		t.Fatalf("pinned file: %d cases, %v, %v", len(f.Cases), ok, err)
	}
	real := f.Cases[name]

	// Pretend the pin was recorded before the reduction order changed.
	stale := pins.Pin{Outputs: []string{strings.Repeat("ab", 32)}}
	f.Cases[name] = stale
	if _, err := pins.Save(out, f); err != nil {
		t.Fatal(err)
	}
	o = cli(t, "determinism", "pin", "--backend", "cpu", "--out", out, "--db", db)
	o.want(t, ExitFailed, "E_NONDETERMINISTIC")
	ack := "tessera-qa report ack repro --suite determinism --case " + name + " --device-class " + class + " --digest " + real.Digest()[:16]
	for _, want := range []string{"changed " + name + ": pinned " + stale.Digest()[:16] + ", got " + real.Digest()[:16], ack} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("refusal output lacks %q:\n%s", want, o.stdout)
		}
	}
	if g, _, _ := pins.Load(os.DirFS(out), out, class); !slices.Equal(g.Cases[name].Outputs, stale.Outputs) {
		t.Fatal("a refused refresh rewrote the file")
	}

	o = cli(t, "report", "ack", "repro", "--db", db, "--suite", "determinism", "--case", name, "--device-class", class,
		"--digest", real.Digest()[:16], "--reason", "reduce folds left to right again", "--by", "tester")
	o.want(t, ExitOK, "")
	o = cli(t, "determinism", "pin", "--backend", "cpu", "--out", out, "--db", db)
	o.want(t, ExitOK, "")
	if !strings.Contains(o.stdout, "(acknowledged)") || !strings.Contains(o.stdout, "1 changed") {
		t.Errorf("accepted refresh output:\n%s", o.stdout)
	}
	g, _, err := pins.Load(os.DirFS(out), out, class)
	if err != nil {
		t.Fatal(err)
	}
	p := g.Cases[name]
	if !slices.Equal(p.Outputs, real.Outputs) || p.Accepted == nil || p.Accepted.Reason != "reduce folds left to right again" ||
		p.Accepted.By != "tester" || p.Accepted.Previous != stale.Digest() {
		t.Errorf("accepted pin = %+v (accepted %+v)", p, p.Accepted)
	}

	o = cli(t, "determinism", "pin", "--backend", "cpu", "--out", out, "--db", "none", "--json", "-")
	o.want(t, ExitOK, "")
	var rep pinJSON
	mustJSON(t, o.stdout, &rep)
	if rep.Written || rep.Cases != 2 || rep.Diff.Same != 2 || rep.DeviceClass != class || rep.Baseline != filepath.Join(out, pins.FileName(class)) {
		t.Errorf("an up-to-date refresh: %+v", rep)
	}
}

func TestDeterminismPinUsage(t *testing.T) {
	pinFew(t, "add/f32/1031")
	cli(t, "determinism").want(t, ExitUsage, "E_INPUT")
	cli(t, "determinism", "pim").want(t, ExitUsage, "E_INPUT")
	// The default --out is the repository's golden/pins, which the test's directory lacks.
	o := cli(t, "determinism", "pin", "--backend", "cpu", "--db", "none")
	o.want(t, ExitUsage, "E_INPUT")
	if !strings.Contains(o.stderr, "no golden/pins here") {
		t.Errorf("stderr: %s", o.stderr)
	}
	dir := t.TempDir()
	cli(t, "determinism", "pin", "--backend", "nosuch", "--out", dir, "--db", "none").want(t, ExitUsage, "E_UNSUPPORTED")
	if cuda, err := backend.Get("cuda"); err == nil && cuda.Available() != nil {
		cli(t, "determinism", "pin", "--backend", "cuda", "--out", dir, "--db", "none").want(t, ExitMissing, "E_NO_DEVICE")
	}
}
