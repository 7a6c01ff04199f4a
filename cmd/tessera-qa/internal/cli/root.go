package cli

import (
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// env is what a verb may touch of the outside world; tests pass buffers.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "tessera-qa",
		Short: "QA harness for the Tessera engine: golden, determinism and smoke checks, exec, compile, replay",
		Long: `tessera-qa checks the Tessera engine and runs graphs on it.

Start with "tessera-qa run": golden checks, determinism and a randomized smoke test on the
best available backend, with results.json, junit.xml and replay manifests under ./tessera-qa-out.

Exit codes: 0 all checks passed, 1 a check failed, 2 bad usage or bad input,
3 an environment asked for explicitly is missing (e.g. --backend cuda without a GPU).
Errors are one line on stderr: "tessera-qa: E_CODE: what, where".`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
					return usage(cmd, "unknown verb %q (did you mean %s?)", args[0], strings.Join(s, " or "))
				}
				return usage(cmd, "unknown verb %q; verbs: %s", args[0], strings.Join(verbNames(cmd), ", "))
			}
			return usage(cmd, "no verb given; verbs: %s", strings.Join(verbNames(cmd), ", "))
		},
	}
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.CompletionOptions.DisableDefaultCmd = true
	root.SuggestionsMinimumDistance = 2
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return err })
	// cobra's own help command prints the root help and exits 0 for an unknown topic; this one
	// treats that as the usage error it is.
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [verb]",
		Short: "Help about any verb",
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			c, rest, err := root.Find(args)
			if err != nil || c == nil || len(rest) > 0 {
				return usage(root, "no help topic %q; verbs: %s", strings.Join(args, " "), strings.Join(verbNames(root), ", "))
			}
			return c.Help()
		}),
	})
	root.AddCommand(
		newRunCmd(e),
		newExecCmd(e),
		newCompileCmd(e),
		newGoldenCmd(e),
		newReplayCmd(e),
		newOpsCmd(e),
		newDevicesCmd(e),
		newVersionCmd(e),
	)
	for _, v := range registered {
		root.AddCommand(v(e))
	}
	return root
}

// registered holds verbs that add themselves from their own file's init (registerVerb), so
// a new verb touches one file.
var registered []func(*env) *cobra.Command

func registerVerb(v func(*env) *cobra.Command) { registered = append(registered, v) }

func verbNames(root *cobra.Command) []string {
	var out []string
	for _, c := range root.Commands() {
		if c.IsAvailableCommand() {
			out = append(out, c.Name())
		}
	}
	return out
}

// exactArgs checks a verb's positional arguments and names them in the message.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == len(names) {
			return nil
		}
		if len(args) < len(names) {
			return usage(cmd, "missing argument %s", strings.Join(names[len(args):], " "))
		}
		return usage(cmd, "unexpected argument %q", args[len(names)])
	}
}
