package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/engine/backend"
)

// deviceJSON is one entry of `devices --json` (docs/cli.md).
type deviceJSON struct {
	Backend     string `json:"backend"`
	Available   bool   `json:"available"`
	Device      string `json:"device,omitempty"`
	DeviceClass string `json:"device_class,omitempty"`
	// Reason is Available()'s one-line coded error when the backend cannot run here.
	Reason string `json:"reason,omitempty"`
}

func newDevicesCmd(e *env) *cobra.Command {
	var jsonPath string
	cmd := &cobra.Command{
		Use:   "devices",
		Short: "List the compiled-in backends, their devices, and why any is unavailable",
		Args:  exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			list := []deviceJSON{}
			for _, b := range backend.All() {
				d := deviceJSON{Backend: b.Name()}
				if err := b.Available(); err != nil {
					d.Reason = err.Error()
				} else {
					d.Available, d.Device, d.DeviceClass = true, b.Device(), b.DeviceClass()
				}
				list = append(list, d)
			}
			w := tabwriter.NewWriter(e.human(jsonPath), 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "BACKEND\tSTATUS\tDEVICE\tCLASS")
			for _, d := range list {
				if d.Available {
					fmt.Fprintf(w, "%s\tavailable\t%s\t%s\n", d.Backend, d.Device, d.DeviceClass)
				} else {
					fmt.Fprintf(w, "%s\tunavailable\t%s\t-\n", d.Backend, d.Reason)
				}
			}
			w.Flush()
			return e.writeJSON(jsonPath, list)
		}),
	}
	addJSONFlag(cmd, &jsonPath)
	return cmd
}
