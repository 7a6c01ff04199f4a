package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/doctor"
	"github.com/tessera-qa/tessera-qa/mig"
)

func init() { registerVerb(newDoctorCmd) }

func newDoctorCmd(e *env) *cobra.Command {
	var (
		jsonPath, level, thresholds, nvmlReplay string
		recordNVML                              string
		devices                                 []string
		cpus                                    []int
		printThresholds                         bool
	)
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check this node's health in levels (DCGM's r1-r4): NVML health fields, memory, bandwidth, SDC scan, burn-in",
		Long: `doctor checks every GPU of the node (through NVML and the CUDA driver) and the CPU backend.

  --level 1  seconds: software and deployment, NVML health fields (ECC, retired pages, row
             remaps, XIDs, clock-event reasons, PCIe link and replays, NVLink errors), a quick
             known-answer run
  --level 2  + device memory pattern test, copy bandwidth against the SKU's minimum, the whole
             pinned golden catalogue against golden/pins on every device (E_SDC on a difference)
  --level 3  + GEMM and attention burn-in with the known-answer scan under load, temperature and
             clocks watched
  --level 4  + long memory test and soak

Every check is pass, warn, fail or skipped with its reason. Thresholds per SKU come from the
embedded file (print it with --print-thresholds) or --thresholds FILE. $TESSERA_NVML_REPLAY
(or --nvml-replay) answers NVML from a recorded session instead of the driver.
Exit codes: 0 no check failed, 1 a check failed, 2 bad usage, 3 a device named with --device is
absent. The JSON schema is docs/health.md's.`,
		Args: exactArgs(),
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			if recordNVML != "" {
				host, _ := os.Hostname()
				rec, err := mig.RecordHealth("recorded by tessera-qa doctor --record-nvml on " + host)
				if err != nil {
					return err
				}
				b, _ := json.MarshalIndent(rec, "", " ")
				if err := writeFileAtomic(recordNVML, append(b, '\n')); err != nil {
					return err
				}
				fmt.Fprintf(e.stderr, "doctor: NVML's answers for %d GPUs recorded in %s (replay with --nvml-replay)\n", len(rec.Devices), recordNVML)
				return nil
			}
			if printThresholds {
				_, err := io.WriteString(e.stdout, doctor.EmbeddedThresholds())
				return err
			}
			lv, err := doctor.ParseLevel(level)
			if err != nil {
				return err
			}
			th := doctor.DefaultThresholds()
			if thresholds != "" {
				if th, err = doctor.LoadThresholds(thresholds); err != nil {
					return err
				}
			}
			if nvmlReplay != "" {
				os.Setenv(mig.ReplayEnv, nvmlReplay)
			}
			w := e.human(jsonPath)
			rep, err := doctor.Run(context.Background(), doctor.Options{Level: lv, Thresholds: th, Devices: devices, CPUs: cpus,
				Log: func(c doctor.Check) { fmt.Fprintf(w, "%-8s %-7s %-32s %s\n", c.Verdict, c.Device, c.Name, c.Reason) }})
			if err != nil {
				return err
			}
			printDoctorSummary(w, rep)
			if err := e.writeJSON(jsonPath, rep); err != nil {
				return err
			}
			if code := rep.ExitCode(); code != 0 {
				if code == ExitMissing {
					return &exitError{code: code, err: doctorAbsent(rep)}
				}
				return &exitError{code: code}
			}
			return nil
		}),
	}
	addJSONFlag(cmd, &jsonPath)
	cmd.Flags().StringVar(&level, "level", "1", "`N` 1-4: which checks (each level includes the ones below)")
	cmd.Flags().StringVar(&thresholds, "thresholds", "", "per-SKU thresholds `FILE` instead of the embedded one")
	cmd.Flags().StringSliceVar(&devices, "device", nil, "what to check: all (default), cpu, cuda, cpu:N, gpu:N (repeatable; a named device that is absent exits 3)")
	cmd.Flags().IntSliceVar(&cpus, "cpus", nil, "IDs of the CPU backend instances to check (default 0)")
	cmd.Flags().StringVar(&nvmlReplay, "nvml-replay", "", "answer NVML from a recorded session `FILE` (as $TESSERA_NVML_REPLAY)")
	cmd.Flags().StringVar(&recordNVML, "record-nvml", "", "record every NVML health answer of this node into `FILE` (a fixture for --nvml-replay) and exit")
	cmd.Flags().BoolVar(&printThresholds, "print-thresholds", false, "print the embedded thresholds file and exit")
	return cmd
}

func printDoctorSummary(w io.Writer, r doctor.Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "doctor level %d on %s: %s (%d pass, %d warn, %d fail, %d skipped) in %.1fs; thresholds v%d (%s), NVML %s\n",
		r.Level, r.Host, r.Verdict, r.Summary.Pass, r.Summary.Warn, r.Summary.Fail, r.Summary.Skipped, r.Seconds,
		r.ThresholdsVersion, r.ThresholdsSource, r.NVMLSource)
	for _, c := range r.Failed() {
		fmt.Fprintf(tw, "FAIL\t%s\t%s\t%s\n", c.Device, c.Name, c.Reason)
	}
	tw.Flush()
}
