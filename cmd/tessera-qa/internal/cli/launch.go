package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/tessera-qa/tessera-qa/engine/dist/launch"
)

func init() { registerVerb(newLaunchCmd) }

func newLaunchCmd(e *env) *cobra.Command {
	var s launch.Spec
	var preflightLevel int
	cmd := &cobra.Command{
		Use:   "launch --nproc-per-node N [--nnodes M --node-rank R --master-addr H --master-port P] [--] PROGRAM [ARGS...]",
		Short: "Start the ranks of a distributed job on this node, as torchrun does",
		Long: `Start N processes of PROGRAM on this node with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
MASTER_ADDR and MASTER_PORT set as torchrun sets them. The launcher of node 0 serves the
rendezvous store at --master-addr:--master-port (port 0, the default, picks a free one on a
single node) and passes it to the ranks as TESSERA_RDZV=tcp://HOST:PORT with the job id in
TESSERA_RDZV_JOB. Rank output lines are prefixed "[rank N] ". SIGINT and SIGTERM are forwarded
to every rank; when a rank fails, the others get SIGTERM, then SIGKILL after --grace, and the
launcher exits with the first failing rank's exit code (128+signal for a killed rank). No
process of the job is left when it returns.

--max-restarts N (torchelastic's): a failed group is torn down and started again up to N
times, each attempt a fresh rendezvous (job id suffixed "-aN") with TORCHELASTIC_RESTART_COUNT
set; ranks resume from their own checkpoints. A signal to the launcher never restarts.

Exit: the ranks' code (0 when all succeeded); 2 for bad usage (E_INPUT: --nproc-per-node 0,
--node-rank outside --nnodes, no PROGRAM); 3 when the rendezvous store cannot be served
(E_COMM_INIT: --master-port in use) or a rank cannot be started.`,
		Example: `  tessera-qa launch --nproc-per-node 3 -- tessera-qa collectives --transport tcp
  tessera-qa launch --nproc-per-node 2 --max-restarts 3 -- tessera-qa train --transport tcp --checkpoint-dir ck --checkpoint-every 10 --resume
  tessera-qa launch --nproc-per-node 4 --nnodes 2 --node-rank 0 --master-addr node01 --master-port 29500 -- ./train`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usage(cmd, "missing PROGRAM")
			}
			return nil
		},
		RunE: verb(func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("nproc-per-node") {
				return usage(cmd, "--nproc-per-node is required")
			}
			if err := e.preflight(cmd, preflightLevel); err != nil {
				return err
			}
			s.Program, s.Args = args[0], args[1:]
			s.Stdout, s.Stderr = e.stdout, e.stderr
			exit, err := launch.Run(context.Background(), s)
			if exit == 0 && err == nil {
				return nil
			}
			return &exitError{code: exit, err: err}
		}),
	}
	f := cmd.Flags()
	// Everything after PROGRAM belongs to PROGRAM, with or without "--".
	f.SetInterspersed(false)
	f.IntVar(&s.NProcPerNode, "nproc-per-node", 0, "ranks to start on this node (required)")
	f.IntVar(&s.NNodes, "nnodes", 1, "nodes in the job")
	f.IntVar(&s.NodeRank, "node-rank", 0, "this node's index, 0..nnodes-1")
	f.StringVar(&s.MasterAddr, "master-addr", "127.0.0.1", "node 0's address, where the rendezvous store is served")
	f.IntVar(&s.MasterPort, "master-port", 0, "the store's port (0: pick a free one; required with --nnodes > 1)")
	f.DurationVar(&s.Timeout, "rdzv-timeout", 0, "how long ranks wait for each other (TESSERA_RDZV_TIMEOUT; 0: their default, 5m)")
	f.DurationVar(&s.Grace, "grace", launch.DefaultGrace, "time between SIGTERM and SIGKILL when tearing ranks down")
	f.IntVar(&s.MaxRestarts, "max-restarts", 0, "start a failed group again up to N times (torchelastic semantics)")
	addPreflightFlag(cmd, &preflightLevel)
	f.StringVar(&s.JobID, "job-id", "", "job id (default: TESSERA_RDZV_JOB, else random on one node, derived from the master on several)")
	return cmd
}
