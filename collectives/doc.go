// Package collectives checks the engine's collectives (engine/dist) the way nccl-tests checks
// NCCL's: for each op x reduction x dtype x count on a world of ranks, in a mode (deterministic,
// fast, exact) over a transport (inproc, tcp, cuda, nccl), it calls the collective out of place and in
// place on inputs seeded per (rank, case), counts the elements that differ from the global
// answer computed in float64 from every rank's inputs (#wrong), digests every rank's output,
// and times warm-up plus iterations into nccl-tests' time, algbw and busbw columns.
//
// Beyond nccl-tests it checks bits: every row carries the digest of every rank's output, so
// runs, transports and runs with injected delays can be compared (CompareDigests); exact mode
// sums one global set of contributions split over the world and must give the same bits for
// every world size (SplitAgreement).
//
// A run is SPMD: every rank calls RunRank with the same Config; the ranks' records are
// gathered over the communicator itself, so rank 0 of a tcp job holds every rank's results.
// The device transports (cuda: engine/dist/cudaipc, nccl: engine/dist/nccl) run the same cases
// through RunDeviceRank: the same inputs uploaded, the device communicator out of place and in
// place, the results downloaded and checked and digested as the host rows are (so digests
// compare across host and device transports, CompareHost), CUDA-event times, and the device's
// copy bandwidth beside busbw; the records travel over a host communicator on the tcp
// transport that carries the device communicator's control frames.
// RunInproc runs a world as goroutines; the tessera-qa collectives verb runs ranks as
// processes (Run joins a job under a launcher, SelfLaunch starts one); --vs gloo times
// torch.distributed's gloo the same way (gloo.go).
//
// Files: op.go (ops, busbw), case.go (cases, sizes, matrices), inputs.go (seeded inputs),
// reference.go (the global answer and tolerances), run.go (one rank's run), row.go (rows,
// reports, cross-run comparisons), inproc.go, tcp.go (processes), device.go (one device rank's
// run), devicejob.go (joining a cuda or nccl job, the device probe), job.go (a whole run as
// the verb describes it), gloo.go (the --vs gloo side), table.go (the printed table).
package collectives
