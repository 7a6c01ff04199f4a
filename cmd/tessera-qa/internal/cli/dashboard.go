package cli

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/report"
	"github.com/tessera-qa/tessera-qa/report/dashboard"
	"github.com/tessera-qa/tessera-qa/report/store"
)

func init() { registerVerb(newDashboardCmd) }

// warmEvery is how often `dashboard serve` looks for new runs in the store and recomputes the
// analyses before a request needs them.
const warmEvery = 15 * time.Second

func newDashboardCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve the results dashboard on this machine, or export it as static pages",
		Args:  cobra.ArbitraryArgs,
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usage(cmd, "unknown subcommand %q: want serve or export", args[0])
			}
			return usage(cmd, "missing subcommand: serve or export")
		}),
	}
	cmd.AddCommand(newDashboardServeCmd(e), newDashboardExportCmd(e))
	return cmd
}

// storeFlags are the flags both subcommands take to find and judge the history.
type storeFlags struct{ db, config string }

func (f *storeFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.db, "db", report.DefaultDB, "results store: a SQLite `PATH` or a postgres:// URL")
	cmd.Flags().StringVar(&f.config, "config", "", "reporter configuration `FILE` (thresholds, baseline branch; docs/reporter.md)")
}

// open opens the store read-only: the dashboard never writes, and a PostgreSQL session is
// read-only on the server's side too.
func (f *storeFlags) open(ctx context.Context) (*dashboard.Site, func(), error) {
	var cfg report.Config
	if f.config != "" {
		var err error
		if cfg, err = report.LoadConfig(f.config); err != nil {
			return nil, nil, err
		}
	}
	db, err := report.OpenReadOnly(ctx, f.db, cfg)
	if err != nil {
		return nil, nil, err
	}
	site, err := dashboard.New(db)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return site, func() { db.Close() }, nil
}

func newDashboardServeCmd(e *env) *cobra.Command {
	var sf storeFlags
	var addr string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the dashboard read-only over HTTP (127.0.0.1:8080 by default)",
		Long: `Serve the dashboard pages from the results store until interrupted (Ctrl-C or SIGTERM).
The store is opened read-only and the server answers GET and HEAD only. It listens on the
loopback interface unless --addr names another host: ":9000" still means 127.0.0.1:9000,
"0.0.0.0:9000" makes it reachable from other machines (a warning says so).`,
		Example: `  tessera-qa dashboard serve
  tessera-qa dashboard serve --addr 127.0.0.1:9000 --db postgres://qa@db.internal/tessera`,
		Args: exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			listen, public, err := dashboard.ListenAddr(addr)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			site, closeDB, err := sf.open(ctx)
			if err != nil {
				return err
			}
			defer closeDB()
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return errs.New(errs.Input, "dashboard: listen on %s: %v", listen, err)
			}
			if public {
				fmt.Fprintf(e.stderr, "tessera-qa: warning: the dashboard is reachable from other machines on %s\n", ln.Addr())
			}
			go site.KeepWarm(ctx, warmEvery)
			fmt.Fprintf(e.stdout, "dashboard at http://%s/ (store %s, read-only); Ctrl-C stops it\n", ln.Addr(), redactDSN(sf.db))
			return dashboard.Serve(ctx, ln, site.Handler())
		}),
	}
	cmd.Flags().StringVar(&addr, "addr", dashboard.DefaultAddr, "listen on `HOST:PORT`")
	sf.add(cmd)
	return cmd
}

func newDashboardExportCmd(e *env) *cobra.Command {
	var sf storeFlags
	var jsonPath string
	cmd := &cobra.Command{
		Use:   "export DIR",
		Short: "Write every dashboard page into DIR as static files that open without a network",
		Long: `Write the dashboard (overview, series index, one page per benchmark series,
reproducibility matrix, flaky specs, chaos and stress metrics) and its stylesheet into DIR,
creating it when missing. The pages link only to each other and open from file:// with no
network: CI uploads DIR as an artifact. Files are written inside DIR only, never through a
symbolic link that leads out of it.`,
		Example: `  tessera-qa dashboard export tessera-qa-out/dashboard
  tessera-qa dashboard export site --db nightly.db --json export.json`,
		Args: exactArgs("DIR"),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			ctx := context.Background()
			site, closeDB, err := sf.open(ctx)
			if err != nil {
				return err
			}
			defer closeDB()
			res, err := site.Export(ctx, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(e.human(jsonPath), "dashboard: %d files, %d bytes in %s (open %s/index.html)\n",
				len(res.Files), res.Bytes, res.Dir, res.Dir)
			return e.writeJSON(jsonPath, res)
		}),
	}
	sf.add(cmd)
	addJSONFlag(cmd, &jsonPath)
	return cmd
}

// redactDSN hides the password of a postgres:// URL before it is printed.
func redactDSN(dsn string) string {
	if !store.IsPostgres(dsn) {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	return u.Redacted()
}
