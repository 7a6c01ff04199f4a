// Package stress runs concurrent workloads against the engine and judges them afterwards:
// N jobs (goroutines of one process, or processes of the tessera-qa binary re-executing
// itself), each cycling through its own pool of seeded random graphs from property's
// generator, every result compared bit for bit with the digest the same graph gave when run
// alone (a difference is E_NONDETERMINISTIC with a replay manifest), while leak monitors
// sample the processes before, during and after the soak.
//
// Index: plan.go (the graph pools and their alone digests), monitor.go (what is sampled, the
// allowances and the leak rule), worker.go (one job's loop and its event stream), run.go
// (Run: alone phase, loaded phase in either mode, the Report), pressure.go (Options.Pressure:
// the OOM hog beside the jobs, and the pressure rows of the Report), hammer.go (processes
// hammering one autotune cache, the corruption halfway, JudgeCache).
package stress
