package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/job"
	"github.com/tessera-qa/tessera-qa/report"
	"github.com/tessera-qa/tessera-qa/report/store"
)

func init() { registerVerb(newReportCmd) }

// historyFlags find the results store and the reporter's configuration.
type historyFlags struct{ db, config string }

func (f *historyFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.db, "db", report.DefaultDB, "results store: a SQLite `PATH` or a postgres:// URL")
	cmd.Flags().StringVar(&f.config, "config", "", "reporter configuration `FILE` (thresholds, baseline branch; docs/reporter.md)")
}

// open opens the store, creating it only for verbs that write (ingest, ack): a mistyped --db
// for a reading verb is an error, not a new empty history.
func (f *historyFlags) open(ctx context.Context, create bool) (*report.DB, error) {
	if !create && !store.IsPostgres(f.db) {
		if _, err := os.Stat(strings.TrimPrefix(f.db, "sqlite:")); err != nil {
			return nil, errs.New(errs.Input, "no results store at %s (%v); create one with tessera-qa report ingest", f.db, err)
		}
	}
	var cfg report.Config
	if f.config != "" {
		var err error
		if cfg, err = report.LoadConfig(f.config); err != nil {
			return nil, err
		}
	}
	return report.Open(ctx, f.db, cfg)
}

func newReportCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Results history: ingest reports, list regressions and flaky tests, acknowledge changes",
		Long: `The results history (docs/reporter.md). "report ingest" stores Ginkgo JSON reports, harness
results.json files, bench JSON and the JSON of "tessera-qa collectives", "chaos" and "stress"; the
other subcommands read what is stored, and "report ack"
and "report baseline reset" record a person's decision with a reason.`,
		Args: cobra.ArbitraryArgs,
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usage(cmd, "unknown subcommand %q: want ingest, status, series, repro, flaky, acks, ack or baseline", args[0])
			}
			return usage(cmd, "missing subcommand: ingest, status, series, repro, flaky, acks, ack or baseline")
		}),
	}
	cmd.AddCommand(newReportIngestCmd(e), newReportStatusCmd(e), newReportSeriesCmd(e), newReportReproCmd(e),
		newReportFlakyCmd(e), newReportAcksCmd(e), newReportAckCmd(e), newReportBaselineCmd(e))
	return cmd
}

// metaFlags say what a report file does not: where and from what its run came.
type metaFlags struct {
	report.Meta
	env []string
}

func (m *metaFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&m.Commit, "commit", "", "commit the run tested (default: the file's, else $GITHUB_SHA, else git)")
	f.StringVar(&m.Branch, "branch", "", "branch (default: $GITHUB_HEAD_REF or $GITHUB_REF_NAME, else git)")
	f.StringVar(&m.Event, "event", "", "what started the run: nightly, pr, push, manual (default: from $GITHUB_EVENT_NAME, else manual)")
	f.StringVar(&m.Machine, "machine", "", "machine name (default: the file's, else $RUNNER_NAME, else the hostname)")
	f.StringVar(&m.DeviceClass, "device-class", "", "device class (default: the file's)")
	f.StringArrayVar(&m.env, "env", nil, "extra `KEY=VALUE` recorded in the run's env (repeatable)")
}

func (m *metaFlags) options(cmd *cobra.Command) (report.IngestOptions, error) {
	o := report.IngestOptions{Override: m.Meta, Fallback: detectMeta()}
	for _, kv := range m.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return o, usage(cmd, "--env wants KEY=VALUE, got %q", kv)
		}
		if o.Override.Env == nil {
			o.Override.Env = map[string]string{}
		}
		o.Override.Env[k] = v
	}
	return o, nil
}

// detectMeta reads what CI variables and git say about this checkout. Files and flags win
// over it (report.IngestOptions).
func detectMeta() report.Meta {
	m := report.Meta{Commit: os.Getenv("GITHUB_SHA"), Machine: os.Getenv("RUNNER_NAME"), Event: "manual"}
	m.Branch = os.Getenv("GITHUB_HEAD_REF") // set on pull requests only
	if m.Branch == "" {
		m.Branch = os.Getenv("GITHUB_REF_NAME")
	}
	switch ev := os.Getenv("GITHUB_EVENT_NAME"); ev {
	case "":
	case "schedule":
		m.Event = "nightly"
	case "pull_request", "pull_request_target":
		m.Event = "pr"
	default:
		m.Event = ev
	}
	if m.Commit == "" {
		m.Commit = git("rev-parse", "--short=12", "HEAD")
	}
	if m.Branch == "" {
		if b := git("rev-parse", "--abbrev-ref", "HEAD"); b != "HEAD" {
			m.Branch = b
		}
	}
	if m.Machine == "" {
		m.Machine, _ = os.Hostname()
	}
	return m
}

func git(args ...string) string {
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// ingestJSON is `report ingest --json`.
type ingestJSON struct {
	Files  []report.IngestResult `json:"files"`
	Errors []string              `json:"errors"`
}

func newReportIngestCmd(e *env) *cobra.Command {
	var (
		hf       historyFlags
		mf       metaFlags
		check    bool
		jsonPath string
	)
	cmd := &cobra.Command{
		Use:   "ingest PATH...",
		Short: "Store Ginkgo JSON reports, results.json, bench, collectives, chaos and stress JSON, one run per file",
		Long: `Validate each file and store it as one run, in one transaction: a file is stored whole or not
at all, and a file that fails validation changes nothing. The kind is recognized from the
content. A file already stored (same bytes and run metadata) is skipped. Every file is tried; the exit status is
2 if any was refused.

A PATH that is a run folder of "tessera-qa run" (DIR/runs/TIME-PID) is stored as that run does
it: its results.json and the measurements beside it (chaos.json, stress.json,
collectives.json, bench.json: metrics and bench rows) as one run.`,
		Example: `  tessera-qa report ingest tessera-qa-out/results.json
  tessera-qa report ingest tessera-qa-out/runs/20261201-214116-4242
  go tool ginkgo -r --json-report=ginkgo.json && tessera-qa report ingest ginkgo.json --event nightly
  tessera-qa report ingest bench.json --db postgres://qa@db.internal/tessera
  tessera-qa stress --jobs 8 --mode processes --duration 10m --json soak.json && tessera-qa report ingest soak.json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usage(cmd, "missing argument PATH")
			}
			return nil
		},
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			o, err := mf.options(cmd)
			if err != nil {
				return err
			}
			w := e.human(jsonPath)
			out := ingestJSON{Files: []report.IngestResult{}, Errors: []string{}}
			var db *report.DB
			if !check {
				if db, err = hf.open(ctx, true); err != nil {
					return err
				}
				defer db.Close()
			}
			var firstErr error
			for _, path := range args {
				res, err := ingestOne(ctx, db, path, o)
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					out.Errors = append(out.Errors, err.Error())
					fmt.Fprintf(e.stderr, "tessera-qa: %s\n", oneLine(err.Error()))
					continue
				}
				out.Files = append(out.Files, res)
				switch {
				case check:
					fmt.Fprintf(w, "ok %s: %s, %d rows\n", path, res.Kind, res.Rows)
				case res.Duplicate:
					fmt.Fprintf(w, "skip %s: already stored as run %d\n", path, res.RunID)
				default:
					fmt.Fprintf(w, "run %d: %s (%s, %d rows)\n", res.RunID, path, res.Kind, res.Rows)
				}
			}
			if err := e.writeJSON(jsonPath, out); err != nil {
				return err
			}
			if firstErr != nil {
				// Each refusal was printed above; the exit status follows the first one's code.
				return &exitError{code: exitCode(firstErr)}
			}
			return nil
		}),
	}
	hf.add(cmd)
	mf.add(cmd)
	cmd.Flags().BoolVar(&check, "check", false, "only validate the files; open no store")
	addJSONFlag(cmd, &jsonPath)
	return cmd
}

func ingestOne(ctx context.Context, db *report.DB, path string, o report.IngestOptions) (report.IngestResult, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		// A run folder of `tessera-qa run` (DIR/runs/TIME-PID): its results and measurements, one run.
		results, ms, err := job.RunFolderFiles(path)
		if err != nil {
			return report.IngestResult{}, err
		}
		if db != nil {
			return db.IngestRun(ctx, results, ms, o)
		}
		return report.CheckRun(results, ms)
	}
	if db == nil {
		data, err := os.ReadFile(path)
		if err != nil {
			return report.IngestResult{}, errs.New(errs.Input, "report %s: %v", path, err)
		}
		return report.Check(path, data)
	}
	return db.IngestFile(ctx, path, o)
}

func newReportStatusCmd(e *env) *cobra.Command {
	return readVerb(e, "status", "Last nightly per suite, open regressions and flaky tests (the dashboard's overview)",
		(*report.DB).Overview, printOverview)
}

// readVerb is a report verb that only reads: it opens the store (never creating one), builds
// one view, prints it for people and writes it as JSON with --json.
func readVerb[T any](e *env, use, short string, view func(*report.DB, context.Context) (T, error), show func(io.Writer, T)) *cobra.Command {
	var (
		hf       historyFlags
		jsonPath string
	)
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			db, err := hf.open(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer db.Close()
			v, err := view(db, cmd.Context())
			if err != nil {
				return err
			}
			show(e.human(jsonPath), v)
			return e.writeJSON(jsonPath, v)
		}),
	}
	hf.add(cmd)
	addJSONFlag(cmd, &jsonPath)
	return cmd
}

func printOverview(w io.Writer, ov report.Overview) {
	fmt.Fprintf(w, "%d runs, %d results and specs, %d benchmark series\n\n", ov.Runs, ov.Results, ov.Series)
	const row = "%-24s %-8s %-12s %-10s %6v %6v %6v %6v\n"
	fmt.Fprintf(w, row, "SUITE", "RUN", "COMMIT", "EVENT", "PASS", "FAIL", "ERROR", "SKIP")
	for _, s := range ov.Suites {
		fmt.Fprintf(w, row, s.Suite, fmt.Sprint(s.Run.ID), s.Run.Commit, s.Run.Event, s.Pass, s.Fail, s.Error, s.Skip)
	}
	fmt.Fprintf(w, "\nopen performance regressions: %d\n", len(ov.OpenPerf))
	for _, p := range ov.OpenPerf {
		fmt.Fprintf(w, "  %-5s %s [%s] %+.1f%% in run %d (p=%.2g)\n", p.Level, p.Key, p.ID, 100*p.Delta, p.Run.ID, p.P)
	}
	for _, p := range ov.AckedPerf {
		fmt.Fprintf(w, "  acked %s [%s] %+.1f%%: %s (%s)\n", p.Key, p.ID, 100*p.Delta, p.Ack.Reason, p.Ack.By)
	}
	fmt.Fprintf(w, "open reproducibility regressions: %d\n", len(ov.OpenRepro))
	for _, r := range ov.OpenRepro {
		fmt.Fprintf(w, "  %s on %s: digest %.12s since run %d (last good run %d)\n", r.Key.Name(), r.Key.DeviceClass, r.Digest, r.FirstBad.ID, r.LastGood.ID)
	}
	fmt.Fprintf(w, "flaky: %d\n", len(ov.Flaky))
	for _, f := range ov.Flaky {
		fmt.Fprintf(w, "  %s/%s on %s: %d passed, %d failed\n", f.Suite, f.Spec, f.Commit, f.Passes, f.Fails)
	}
}

func newReportSeriesCmd(e *env) *cobra.Command {
	var (
		hf       historyFlags
		jsonPath string
	)
	cmd := &cobra.Command{
		Use:   "series [ID]",
		Short: "List benchmark series, or show one with its change points and baseline window",
		Args:  cobra.MaximumNArgs(1),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			db, err := hf.open(ctx, false)
			if err != nil {
				return err
			}
			defer db.Close()
			w := e.human(jsonPath)
			if len(args) == 0 {
				idx, err := db.SeriesIndex(ctx)
				if err != nil {
					return err
				}
				const row = "%-16s %-12s %+8s %6s  %s\n"
				fmt.Fprintf(w, row, "ID", "LEVEL", "DELTA", "RUNS", "SERIES")
				for _, s := range idx {
					fmt.Fprintf(w, row, s.ID, s.Level, fmt.Sprintf("%+.1f%%", 100*s.Delta), fmt.Sprint(s.Points), s.Key)
				}
				return e.writeJSON(jsonPath, idx)
			}
			key, ok, err := db.SeriesByID(ctx, args[0])
			if err != nil {
				return err
			}
			if !ok {
				return errs.New(errs.Input, "no series with id %q (see tessera-qa report series)", args[0])
			}
			s, err := db.Series(ctx, key)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%s [%s], unit %s; latest: %s %+.1f%% (p=%.2g) over %d baseline runs\n",
				s.Key, s.ID, s.Unit, s.Latest.Level, 100*s.Latest.Delta, s.Latest.P, s.Latest.BaselineRuns)
			for _, p := range s.Points {
				mark := " "
				switch {
				case p.ChangePoint:
					mark = "*"
				case p.InBaseline:
					mark = "b"
				}
				fmt.Fprintf(w, "%s run %-6d %-12s %s %.4g\n", mark, p.Run.ID, p.Run.Commit, p.Run.Time.Format("2006-01-02"), p.Value)
			}
			for _, a := range append(s.Resets, s.Acks...) {
				fmt.Fprintf(w, "%s at run %d by %s: %s\n", a.Kind, a.RunID, a.By, a.Reason)
			}
			return e.writeJSON(jsonPath, s)
		}),
	}
	hf.add(cmd)
	addJSONFlag(cmd, &jsonPath)
	return cmd
}

func newReportReproCmd(e *env) *cobra.Command {
	return readVerb(e, "repro", "Reproducibility: cases whose digest changed, with the first bad and last good run",
		(*report.DB).ReproMatrix, func(w io.Writer, m report.ReproMatrix) {
			counts := map[string]int{}
			for _, c := range m.Cells {
				counts[c.Status]++
			}
			fmt.Fprintf(w, "%d cases x %d device classes: %d stable, %d new digest, %d acknowledged, %d untracked\n",
				len(m.Cases), len(m.DeviceClasses), counts[report.ReproStable], counts[report.ReproNewDigest],
				counts[report.ReproAcked], counts[report.ReproUntracked])
			for _, r := range m.Regressions {
				fmt.Fprintf(w, "  %s on %s (%s): digest %.12s first in run %d (commit %s), last good run %d (commit %s)\n",
					r.Key.Name(), r.Key.DeviceClass, r.Key.Determinism, r.Digest, r.FirstBad.ID, r.FirstBad.Commit, r.LastGood.ID, r.LastGood.Commit)
			}
		})
}

func newReportFlakyCmd(e *env) *cobra.Command {
	return readVerb(e, "flaky", "Specs and cases that passed and failed on the same commit",
		(*report.DB).Flaky, func(w io.Writer, fl []report.FlakySpec) {
			fmt.Fprintf(w, "%d flaky\n", len(fl))
			for _, f := range fl {
				fmt.Fprintf(w, "  %s %s/%s on %s: %d passed, %d failed; last failure: %s\n", f.Kind, f.Suite, f.Spec, f.Commit, f.Passes, f.Fails, oneLine(f.LastFailure))
			}
		})
}

func newReportAcksCmd(e *env) *cobra.Command {
	return readVerb(e, "acks", "Every acknowledgement and baseline reset, with who and why",
		(*report.DB).Acks, func(w io.Writer, acks []report.Ack) {
			for _, a := range acks {
				printAck(w, a)
			}
		})
}

func printAck(w io.Writer, a report.Ack) {
	what := a.Target
	if a.Digest != "" {
		what += " digest " + a.Digest[:min(12, len(a.Digest))]
	}
	if a.RunID != 0 {
		what += fmt.Sprintf(" at run %d", a.RunID)
	}
	fmt.Fprintf(w, "#%d %s %s %s by %s: %s\n", a.ID, a.Time.Format("2006-01-02 15:04"), a.Kind, what, a.By, a.Reason)
}

// decisionFlags are what every acknowledgement takes.
type decisionFlags struct {
	reason, by string
}

func (d *decisionFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&d.reason, "reason", "", "why (required; recorded and shown with the decision)")
	cmd.Flags().StringVar(&d.by, "by", "", "who decides (default: $TESSERA_USER, $GITHUB_ACTOR or $USER)")
}

func (d *decisionFlags) check(cmd *cobra.Command) error {
	if strings.TrimSpace(d.reason) == "" {
		return usage(cmd, "--reason is required: say why this change is expected")
	}
	return nil
}

func newReportAckCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ack",
		Short: "Acknowledge an expected change: a new digest (repro) or a slowdown (perf)",
		Args:  cobra.ArbitraryArgs,
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			return usage(cmd, "missing or unknown kind: want repro or perf")
		}),
	}
	cmd.AddCommand(newReportAckReproCmd(e), newReportAckPerfCmd(e))
	return cmd
}

func newReportAckReproCmd(e *env) *cobra.Command {
	var (
		hf       historyFlags
		d        decisionFlags
		k        report.ReproKey
		digest   string
		jsonPath string
	)
	cmd := &cobra.Command{
		Use:   "repro",
		Short: "Accept a new digest of one case on one device class (the engine changed on purpose)",
		Example: `  tessera-qa report ack repro --suite golden --case matmul/f32/64x64x64 --device-class cpu/amd64 \
      --reason "tile order changed in compiler PR 123"`,
		Args: exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			if k.Suite == "" || k.Case == "" || k.DeviceClass == "" {
				return usage(cmd, "--suite, --case and --device-class are required")
			}
			if err := d.check(cmd); err != nil {
				return err
			}
			db, err := hf.open(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer db.Close()
			a, err := db.AckRepro(cmd.Context(), k, digest, d.reason, d.by)
			if err != nil {
				return err
			}
			printAck(e.human(jsonPath), a)
			return e.writeJSON(jsonPath, a)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&k.Suite, "suite", "", "suite of the case")
	f.StringVar(&k.Case, "case", "", "case name")
	f.StringVar(&k.DeviceClass, "device-class", "", "device class")
	f.StringVar(&k.Determinism, "determinism", "", "determinism mode (needed only when the case has several)")
	f.StringVar(&digest, "digest", "", "the digest to accept, or a unique prefix (default: the case's one unaccepted digest)")
	hf.add(cmd)
	d.add(cmd)
	addJSONFlag(cmd, &jsonPath)
	return cmd
}

// seriesDecision is `report ack perf` and `report baseline reset`: both name a series and a run.
func seriesDecision(e *env, use, short string, do func(db *report.DB, ctx context.Context, id string, run int64, reason, by string) (report.Ack, error)) *cobra.Command {
	var (
		hf       historyFlags
		d        decisionFlags
		id       string
		run      int64
		jsonPath string
	)
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			if id == "" {
				return usage(cmd, "--series is required (IDs: tessera-qa report series)")
			}
			if err := d.check(cmd); err != nil {
				return err
			}
			db, err := hf.open(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer db.Close()
			a, err := do(db, cmd.Context(), id, run, d.reason, d.by)
			if err != nil {
				return err
			}
			printAck(e.human(jsonPath), a)
			return e.writeJSON(jsonPath, a)
		}),
	}
	cmd.Flags().StringVar(&id, "series", "", "series `ID` (tessera-qa report series lists them)")
	cmd.Flags().Int64Var(&run, "run", 0, "run `ID` (default: the series' latest run)")
	hf.add(cmd)
	d.add(cmd)
	addJSONFlag(cmd, &jsonPath)
	return cmd
}

func newReportAckPerfCmd(e *env) *cobra.Command {
	return seriesDecision(e, "perf", "Accept the slowdown a series shows at a run; a further slowdown is reported again",
		(*report.DB).AckPerf)
}

func newReportBaselineCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "baseline",
		Short: "Manage performance baselines",
		Args:  cobra.ArbitraryArgs,
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			return usage(cmd, "missing or unknown subcommand: want reset")
		}),
	}
	cmd.AddCommand(seriesDecision(e, "reset", "Restart a series' baseline at a run: earlier runs are no longer compared with",
		(*report.DB).ResetBaseline))
	return cmd
}

// addRunDBFlag is `run --db`: where `run` stores its own results.
func addRunDBFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "db", "", "also store the results in this history (SQLite `PATH` or postgres:// URL; default DIR/results.db; \"none\" to skip)")
}

// ingestRunResults stores results.json of a finished run with its measurement files (chaos,
// stress, collectives, bench JSON in the run folder) as one run. A failure is a warning on
// stderr, never an error: the results are safe in results.json and `report ingest` can store
// them later. It returns the warning, if any, for tests.
func ingestRunResults(ctx context.Context, w, stderr io.Writer, db, outDir string, rep *job.Report) string {
	results, measurements := rep.RunResults(), rep.Measurements
	if db == "none" {
		return ""
	}
	if db == "" {
		db = filepath.Join(outDir, "results.db")
	}
	warn := func(err error) string {
		msg := fmt.Sprintf("tessera-qa: warning: results not stored in %s: %s (they are in %s; store them later with: tessera-qa report ingest %s)",
			db, oneLine(err.Error()), rep.RunDir, rep.RunDir)
		fmt.Fprintln(stderr, msg)
		return msg
	}
	h, err := report.Open(ctx, db, report.Config{})
	if err != nil {
		return warn(err)
	}
	defer h.Close()
	res, err := h.IngestRun(ctx, results, measurements, report.IngestOptions{Fallback: detectMeta()})
	if err != nil {
		return warn(err)
	}
	fmt.Fprintf(w, "history %s (run %d)\ndashboard: tessera-qa dashboard serve --db %s\n", db, res.RunID, db)
	return ""
}
