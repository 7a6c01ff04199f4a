// Package chaos injects faults into a data-parallel training job, lets it recover, and
// checks afterwards what happened (etcd's robustness tests and Jepsen are the models).
//
// A fault is a small value with typed fields behind one interface (fault.go): a hierarchical
// name, where it acts (inside the rank process it names, in every rank, or in the agent that
// launched the ranks), whether it can act in a given run (Available, with the reason when
// not), what must follow it (Expect: the error codes that count as detecting it, and whether
// the group must restart), and Inject, which acts on real things with its undo deferred
// inside: signals to the rank processes (SIGKILL, SIGSTOP/SIGCONT), the transports' real
// outgoing frames through dist.Intercept (drop, flip a bit, duplicate, hold back, cut a
// partition, a NaN from the device), the checkpoint files (bit rot, torn write), the file
// system (a tmpfs filled up), the rendezvous store (restarted empty), the GPU (a kernel that
// stores to an unmapped address, memory taken), the containers (docker kill, pause, network
// disconnect). Catalogue lists one of each kind.
//
// A scenario (scenario.go) is data: workload, world, transport, steps, checkpoint interval,
// bounds and the injections (fault, rank, step). Exploratory scenarios are seeded random
// schedules (RandomScenario); regression scenarios are named after the bug they reproduce
// (Regressions).
//
// Execute (agent.go) runs a scenario. Over tcp it starts the ranks through the launcher
// (engine/dist/launch) with --max-restarts, serves the rendezvous store itself (so that it can
// restart it), and injects the agent's faults; each rank (worker.go, RunRank) trains with the
// reference workload (training), reports every event as an "@chaos {json}" line on its
// stdout, and injects its own faults at their steps. On goroutine ranks (inproc) the agent
// restarts the group itself. Under torchrun or srun every task is one node's agent.
//
// Every run records one history on one clock (history.go) into its artifacts folder:
// ranks started and ended, resume points, steps applied with their loss bits, checkpoints
// committed, faults injected and healed, failures detected with their codes, restarts, the
// end. Check (check.go) judges it afterwards against the fault-free run with the same seed
// and world: every step any rank applied carries the fault-free loss bits and the final
// parameters are bit-identical; the job finished within its bound; every attempt resumed from
// the newest committed checkpoint no fault damaged, and applied each step after it once; every
// fault was detected with one of its codes (or tolerated, or masked by an earlier fault of the
// same attempt). It reports time-to-detect, time-to-recover and lost steps per fault;
// Summarize aggregates many runs (quantiles, worst cases).
//
// Files: fault.go (interface, catalogue, injections), faults_rank.go, faults_net.go,
// faults_store.go (checkpoint, disk, store), faults_device.go, faults_node.go, tap.go (frame
// hooks), scenario.go, worker.go, agent.go, history.go, check.go, summary.go; container/
// runs ranks as Docker containers (testcontainers-go).
package chaos
