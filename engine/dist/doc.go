// Package dist is the engine's distributed runtime: communicators over a Transport, the
// collectives (all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, send/recv) and the
// three reduction modes.
//
// The determinism contract (design.md §4, §10) lives here: transports only move bytes, and in
// the default deterministic mode every reduction adds contributions in global order (rank 0..n-1,
// then each rank's local contributions in order) for every element, whatever the transport, the
// arrival order or the timing. Exact mode sums contributions exactly and rounds once, so its bits
// do not depend on the world size or the split of the data either. Fast mode makes no promise.
//
// Files: frame.go (the wire header every transport carries), transport.go (the Transport
// interface), inproc.go (ranks as goroutines), intercept.go (faults on real frames), comm.go
// (communicators, deadlines, desync detection), collectives.go (the algorithms), pipeline.go
// (the segmented reduce-scatter + all-gather behind all_reduce), reduce.go (the local, ordered
// reductions). Subpackages: exact (exact summation), mesh and dtensor (layouts), tcp, rdzv and
// launch (processes), cudaipc, nccl and devreduce (device buffers), run (rank programs).
package dist
