package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/golden"
)

// defaultGoldenDir is where `golden update` writes when run from the repository root.
const defaultGoldenDir = "golden/data"

func newGoldenCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "golden",
		Short: "Regenerate or verify the golden files",
		Args:  cobra.ArbitraryArgs,
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usage(cmd, "unknown subcommand %q: want update or verify", args[0])
			}
			return usage(cmd, "missing subcommand: update or verify")
		}),
	}
	cmd.AddCommand(newGoldenUpdateCmd(e), newGoldenVerifyCmd(e))
	return cmd
}

// goldenUpdateJSON is the shape of `golden update --json` (docs/cli.md).
type goldenUpdateJSON struct {
	Dir     string   `json:"dir"`
	Files   int      `json:"files"`
	Cases   int      `json:"cases"`
	Written []string `json:"written"`
	Removed []string `json:"removed"`
	Bytes   int64    `json:"bytes"`
}

func newGoldenUpdateCmd(e *env) *cobra.Command {
	var dir, jsonPath string
	cmd := &cobra.Command{
		Use:   "update",
		Short: "Regenerate the golden files from the catalogue and the golden model",
		Long: `Regenerate every golden file under --dir from the catalogue (golden/catalogue*.go) and the
golden model, and delete .golden files the catalogue no longer produces. Only files whose bytes
change are rewritten. The binary embeds golden/data at build time: rebuild after updating.`,
		Args: exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("dir") {
				if st, err := os.Stat(dir); err != nil || !st.IsDir() {
					return usage(cmd, "no %s here: run from the repository root or pass --dir", dir)
				}
			}
			sum, err := golden.Update(dir)
			if err != nil {
				return err
			}
			w := e.human(jsonPath)
			fmt.Fprintf(w, "golden update: %d cases in %d files under %s (%d bytes): %d written, %d removed\n",
				sum.Cases, sum.Files, dir, sum.Bytes, len(sum.Written), len(sum.Removed))
			listFiles(w, "wrote  ", sum.Written)
			listFiles(w, "removed", sum.Removed)
			return e.writeJSON(jsonPath, goldenUpdateJSON{Dir: dir, Files: sum.Files, Cases: sum.Cases,
				Written: nonNil(sum.Written), Removed: nonNil(sum.Removed), Bytes: sum.Bytes})
		}),
	}
	cmd.Flags().StringVar(&dir, "dir", defaultGoldenDir, "golden data `DIR` to write")
	addJSONFlag(cmd, &jsonPath)
	return cmd
}

// goldenVerifyJSON is the shape of `golden verify --json` (docs/cli.md).
type goldenVerifyJSON struct {
	Source   string        `json:"source"` // "embedded" or the directory verified
	OK       bool          `json:"ok"`
	Problems []problemJSON `json:"problems"`
}

type problemJSON struct {
	File    string `json:"file"`
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

func newGoldenVerifyCmd(e *env) *cobra.Command {
	var dir, jsonPath string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check the golden files: format, checksums, staleness against the catalogue",
		Long: `Verify the golden data compiled into this binary, or the directory --dir: every file's
format and checksum, that it matches what the catalogue produces now, and that no file is missing
or extra. Each problem is printed as one error line on stderr; exit 1 if there is any.`,
		Args: exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			var problems []golden.Problem
			var err error
			source := "embedded"
			if dir != "" {
				source = dir
				problems, err = golden.VerifyDir(dir)
			} else {
				problems, err = golden.Verify(golden.Data())
			}
			if err != nil {
				return err
			}
			rep := goldenVerifyJSON{Source: source, OK: len(problems) == 0, Problems: []problemJSON{}}
			for _, p := range problems {
				printErr(e.stderr, p.Err())
				rep.Problems = append(rep.Problems, problemJSON{File: p.File, Kind: p.Kind, Message: p.Msg})
			}
			w := e.human(jsonPath)
			if rep.OK {
				fmt.Fprintf(w, "golden verify (%s): ok\n", source)
			} else {
				fmt.Fprintf(w, "golden verify (%s): %d problems\n", source, len(problems))
			}
			if err := e.writeJSON(jsonPath, rep); err != nil {
				return err
			}
			if !rep.OK {
				return failed()
			}
			return nil
		}),
	}
	cmd.Flags().StringVar(&dir, "dir", "", "verify this data `DIR` instead of the embedded data")
	addJSONFlag(cmd, &jsonPath)
	return cmd
}

// maxFilesListed keeps a first-time update (every file written) from flooding the terminal.
const maxFilesListed = 10

func listFiles(w io.Writer, verb string, files []string) {
	for i, p := range files {
		if i == maxFilesListed {
			fmt.Fprintf(w, "  ... and %d more (see --json)\n", len(files)-maxFilesListed)
			return
		}
		fmt.Fprintf(w, "  %s %s\n", verb, p)
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
