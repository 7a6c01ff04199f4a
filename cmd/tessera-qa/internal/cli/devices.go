package cli

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/engine/backend"
	"github.com/tessera-qa/tessera-qa/mig"
)

// deviceJSON is one entry of `devices --json` (docs/cli.md).
type deviceJSON struct {
	Backend     string `json:"backend"`
	Available   bool   `json:"available"`
	Device      string `json:"device,omitempty"`
	DeviceClass string `json:"device_class,omitempty"`
	// Reason is Available()'s one-line coded error when the backend cannot run here.
	Reason string `json:"reason,omitempty"`
	// Partition entries (package mig): one per MIG instance of a GPU in MIG mode, else one
	// per GPU, found through NVML or nvidia-smi -L. Backend is "cuda" and Kind "mig" or "gpu".
	Kind        string `json:"kind,omitempty"`
	UUID        string `json:"uuid,omitempty"`
	GPU         *int   `json:"gpu,omitempty"`
	Profile     string `json:"profile,omitempty"`
	MIGMode     string `json:"mig_mode,omitempty"`
	SMs         int    `json:"sms,omitempty"`
	MemoryBytes uint64 `json:"memory_bytes,omitempty"`
	Visible     string `json:"cuda_visible_devices,omitempty"`
	Env         string `json:"env,omitempty"`   // SM partitions: the variable that places a process there
	Count       int    `json:"count,omitempty"` // SM partitions: how many of this size the GPU makes
	Source      string `json:"source,omitempty"`
}

// discoverGPUs is mig.Discover; tests replace it.
var discoverGPUs = mig.Discover

// partitionEntries lists the targets of gpus as devices.
func partitionEntries(gpus []mig.GPU, source string) []deviceJSON {
	var out []deviceJSON
	for _, t := range mig.Targets(gpus) {
		out = append(out, deviceJSON{Backend: "cuda", Available: true, Device: t.Name, Kind: t.Kind, UUID: t.UUID,
			GPU: &t.GPU, Profile: t.Profile, MIGMode: t.MIGMode, SMs: t.SMs, MemoryBytes: t.MemoryBytes,
			Visible: t.Visible, Env: t.Env, Count: t.Count, Source: source})
	}
	return out
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
			gpus, source, derr := discoverGPUs(context.Background())
			parts := partitionEntries(gpus, source)
			list = append(list, parts...)
			w := tabwriter.NewWriter(e.human(jsonPath), 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "BACKEND\tSTATUS\tDEVICE\tCLASS")
			for _, d := range list {
				if d.Kind != "" {
					continue
				}
				if d.Available {
					fmt.Fprintf(w, "%s\tavailable\t%s\t%s\n", d.Backend, d.Device, d.DeviceClass)
				} else {
					fmt.Fprintf(w, "%s\tunavailable\t%s\t-\n", d.Backend, d.Reason)
				}
			}
			w.Flush()
			if derr != nil {
				fmt.Fprintf(e.human(jsonPath), "partitions: none found (%v)\n", derr)
			} else {
				fmt.Fprintf(e.human(jsonPath), "partitions (%s; MIG instances when MIG is on, else whole GPUs and their SM partitions):\n", source)
				w = tabwriter.NewWriter(e.human(jsonPath), 0, 0, 2, ' ', 0)
				fmt.Fprintln(w, "KIND\tGPU\tMIG\tDEVICE\tSMS\tMEMORY\tPLACE WITH")
				for _, d := range parts {
					sms, mem := "-", "-"
					if d.SMs > 0 {
						sms = fmt.Sprint(d.SMs)
					}
					if d.MemoryBytes > 0 {
						mem = fmt.Sprintf("%.1f GiB", float64(d.MemoryBytes)/(1<<30))
					}
					place := "CUDA_VISIBLE_DEVICES=" + d.Visible
					if d.Env != "" {
						sms, mem = fmt.Sprintf("%d (x%d)", d.SMs, d.Count), "shared"
						place += " " + d.Env
					}
					fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", d.Kind, *d.GPU, d.MIGMode, d.Device, sms, mem, place)
				}
				w.Flush()
				for _, d := range parts {
					if d.Env != "" {
						fmt.Fprintln(e.human(jsonPath), "SM partitions are green contexts of one process (TESSERA_CUDA_SMS=N places a process's CUDA backend on N SMs); memory bandwidth and L2 are shared, and processes placed on partitions of one GPU are not given disjoint SMs.")
						break
					}
				}
			}
			return e.writeJSON(jsonPath, list)
		}),
	}
	addJSONFlag(cmd, &jsonPath)
	return cmd
}
