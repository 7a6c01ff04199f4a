package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/engine/version"
)

// versionJSON is the shape of `version --json` (docs/cli.md).
type versionJSON struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"go_version"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
}

func newVersionCmd(e *env) *cobra.Command {
	var jsonPath string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the engine version, source commit and Go version",
		Args:  exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			v := versionJSON{
				Version: version.Version, Commit: version.Commit(), GoVersion: runtime.Version(),
				OS: runtime.GOOS, Arch: runtime.GOARCH,
			}
			fmt.Fprintf(e.human(jsonPath), "tessera-qa %s (commit %s, %s %s/%s)\n", v.Version, v.Commit, v.GoVersion, v.OS, v.Arch)
			return e.writeJSON(jsonPath, v)
		}),
	}
	addJSONFlag(cmd, &jsonPath)
	return cmd
}
