// Package dtensor holds distributed tensors and the data movement between layouts:
//
//   - blocks.go: a rank's block of a global tensor (Shard), the global tensor from every rank's
//     block (Assemble, which also checks that replicas agree bit for bit), and the byte
//     shuffles the collectives need along any dim;
//   - groups.go: a rank's sub-communicators, one per mesh axis (mesh.Group, mesh.GroupID);
//   - exec.go: Exec runs one collective graph node (all_reduce, all_gather, reduce_scatter,
//     broadcast, all_to_all, send, recv, chunk) over those communicators;
//   - dtensor.go: DTensor (global shape, local block, layout, mesh) and Redistribute, which
//     moves it to another layout with the same steps the compiler's shard pass emits.
//
// Arithmetic happens only in engine/dist's reductions, so the bits follow the communicator's
// mode (deterministic by default: contributions added in coordinate order).
package dtensor
