package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/determinism/pins"
	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/golden"
	"github.com/tessera-qa/tessera-qa/report"
)

func init() { registerVerb(newDeterminismCmd) }

// pinSpecs is the catalogue `determinism pin` records; tests point it at a few specs.
var pinSpecs = golden.Catalogue

func newDeterminismCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "determinism",
		Short: "Pinned digests per device class: record or refresh them",
		Args:  cobra.ArbitraryArgs,
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usage(cmd, "unknown subcommand %q: want pin", args[0])
			}
			return usage(cmd, "missing subcommand: pin")
		}),
	}
	cmd.AddCommand(newDeterminismPinCmd(e))
	return cmd
}

// pinJSON is the shape of `determinism pin --json` (docs/cli.md).
type pinJSON struct {
	Backend     string    `json:"backend"`
	DeviceClass string    `json:"device_class"`
	File        string    `json:"file"`
	Baseline    string    `json:"baseline"` // where the pins compared with came from: the file, "embedded" or "none"
	Written     bool      `json:"written"`
	Cases       int       `json:"cases"`
	Diff        pins.Diff `json:"diff"`
	Error       string    `json:"error,omitempty"`
}

func newDeterminismPinCmd(e *env) *cobra.Command {
	var backendName, out, db, jsonPath string
	cmd := &cobra.Command{
		Use:   "pin --backend cpu|cuda [--out DIR] [--db PATH]",
		Short: "Record the golden catalogue's digests for this device class, or refresh them after an acknowledged change",
		Long: `Run every golden catalogue case once on --backend and write its output digests to
DIR/<device class>.json (golden/pins; the determinism suite checks them, docs/determinism.md).
The pins compared with are DIR's file, else the ones compiled into this binary.

A case whose digest differs from its pin is written only when the results store (--db) holds
an acknowledgement of its new digest, made with
  tessera-qa report ack repro --suite determinism --case CASE --device-class CLASS --digest D --reason WHY
and the reason is then recorded in the file. Otherwise nothing is written, every such case is
printed with its ack command, and the exit status is 1 (E_NONDETERMINISTIC). The run's results
are stored in --db first, so that the ack command finds the new digests there. Cases added to
or removed from the catalogue need no acknowledgement.

Exit 0 when the file is up to date or was written, 1 on an unacknowledged change, 2 on bad
usage, 3 when --backend cannot run here.`,
		Example: `  tessera-qa determinism pin --backend cpu
  tessera-qa determinism pin --backend cuda --out /tmp/pins --db /tmp/pins/results.db`,
		Args: exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("out") {
				if st, err := os.Stat(out); err != nil || !st.IsDir() {
					return usage(cmd, "no %s here: run from the repository root or pass --out", out)
				}
			} else if err := os.MkdirAll(out, 0o755); err != nil {
				return errs.Wrap(errs.Input, err, "determinism pin: --out %s", out)
			}
			b, err := backend.Get(backendName)
			if err != nil {
				return err
			}
			if err := b.Available(); err != nil {
				return errs.Wrap(errs.NoDevice, err, "backend %s", backendName)
			}
			class := b.DeviceClass()
			rep := pinJSON{Backend: b.Name(), DeviceClass: class, File: filepath.Join(out, pins.FileName(class))}
			old, hasOld, baseline, err := loadPins(out, class)
			if err != nil {
				return err
			}
			rep.Baseline = baseline
			w := e.human(jsonPath)
			fmt.Fprintf(w, "determinism pin: %s on %s (%s), pins from %s\n", b.Name(), class, b.Device(), baseline)
			rec, err := pins.Record(pinSpecs(), b, old)
			if err != nil {
				return err
			}
			acks, err := storePinRun(cmd.Context(), e.stderr, w, db, rec)
			if err != nil {
				return err
			}
			f, diff, ferr := pins.Refresh(old, hasOld, rec, acks)
			rep.Diff, rep.Cases = diff, len(rec.Digests)
			printPinDiff(w, class, db, diff, acks)
			if ferr == nil {
				rep.Written, ferr = savePins(out, f, rep.File)
			}
			if ferr != nil {
				rep.Error = ferr.Error()
				if err := e.writeJSON(jsonPath, rep); err != nil {
					return err
				}
				return ferr
			}
			state := "unchanged"
			if rep.Written {
				state = "written"
			}
			fmt.Fprintf(w, "determinism pin: %d cases: %d same, %d changed, %d added, %d missing; %s %s\n",
				rep.Cases, diff.Same, len(diff.Changed), len(diff.Added), len(diff.Missing), rep.File, state)
			return e.writeJSON(jsonPath, rep)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&backendName, "backend", "cpu", "backend whose device class to pin: cpu or cuda")
	f.StringVar(&out, "out", golden.PinsRoot, "pins `DIR` to write (the repository's by default)")
	f.StringVar(&db, "db", report.DefaultDB, "results store holding the acknowledgements (SQLite `PATH` or postgres:// URL; \"none\": no store, so no change can be accepted)")
	addJSONFlag(cmd, &jsonPath)
	return cmd
}

// loadPins reads the pins of class from dir, else from the binary's embedded pins, and says
// which ("none": no pins yet).
func loadPins(dir, class string) (pins.File, bool, string, error) {
	f, ok, err := pins.Load(os.DirFS(dir), dir, class)
	if err != nil || ok {
		return f, ok, filepath.Join(dir, pins.FileName(class)), err
	}
	f, ok, err = pins.Load(golden.Pins(), "embedded "+golden.PinsRoot, class)
	if err != nil || ok {
		return f, ok, "embedded " + filepath.Join(golden.PinsRoot, pins.FileName(class)), err
	}
	return pins.File{}, false, "none", nil
}

// storePinRun stores the run's results in the store and returns its acknowledgements of the
// determinism cases on the run's class. With --db none there are none.
func storePinRun(ctx context.Context, stderr, w io.Writer, dsn string, rec pins.Recording) ([]pins.Ack, error) {
	if dsn == "none" {
		return nil, nil
	}
	db, err := report.Open(ctx, dsn, report.Config{})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	data, err := json.Marshal(rec.Results)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "determinism pin: encode results")
	}
	res, err := db.IngestBytes(ctx, "determinism-pin.json", data, report.IngestOptions{Fallback: detectMeta()})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(w, "history %s (run %d)\n", dsn, res.RunID)
	all, err := db.Acks(ctx)
	if err != nil {
		return nil, err
	}
	var out []pins.Ack
	for _, a := range all {
		k, ok := report.ParseReproKey(a.Target)
		if a.Kind == report.AckRepro && ok && k.Suite == pins.Suite && k.DeviceClass == rec.DeviceClass {
			out = append(out, pins.Ack{Case: k.Case, Digest: a.Digest, Reason: a.Reason, By: a.By, Time: a.Time})
		}
	}
	return out, nil
}

// savePins writes f unless the file already holds exactly its bytes.
func savePins(dir string, f pins.File, path string) (bool, error) {
	want, err := pins.Marshal(f)
	if err != nil {
		return false, err
	}
	if have, err := fs.ReadFile(os.DirFS(dir), pins.FileName(f.DeviceClass)); err == nil && string(have) == string(want) {
		return false, nil
	}
	if _, err := pins.Save(dir, f); err != nil {
		return false, err
	}
	return true, nil
}

// printPinDiff lists every change, with its acknowledgement or the command that makes one.
func printPinDiff(w io.Writer, class, db string, d pins.Diff, acks []pins.Ack) {
	acked := map[[2]string]bool{}
	for _, a := range acks {
		acked[[2]string{a.Case, a.Digest}] = true
	}
	dbFlag := ""
	if db != report.DefaultDB {
		dbFlag = " --db " + db
	}
	for _, c := range d.Changed {
		fmt.Fprintf(w, "  changed %s: pinned %.16s, got %.16s", c.Case, c.PinnedDigest(), c.GotDigest())
		if acked[[2]string{c.Case, c.GotDigest()}] {
			fmt.Fprintln(w, " (acknowledged)")
			continue
		}
		fmt.Fprintf(w, "; accept with: %s%s\n", pins.AckCommand(class, c.Case, c.GotDigest()), dbFlag)
	}
	listFiles(w, "added  ", d.Added)
	listFiles(w, "missing", d.Missing)
}
