// Package mesh describes where a distributed program runs and how its tensors are split:
//
//   - Mesh: named axes with sizes in order (dp=4,tp=2), the world ranks laid out row-major over
//     them, one device descriptor per rank (cpu:0, cuda:0, MIG-<uuid>, ...), the group of ranks
//     along an axis and a deterministic communicator id per group.
//   - Layout: per tensor, each dim replicated or sharded over one mesh axis, plus the axes over
//     which the values are a pending (partial) sum.
//   - shard arithmetic: a rank's local shape and its block's offset in the global tensor, with
//     E_SHAPE errors naming tensor, dim and axis when a world does not divide a dim.
//
// The package imports no communication code, so the graph IR, the compiler and the reference
// model can all use it; engine/dist/dtensor moves data between layouts through a *dist.Comm.
//
// Files: mesh.go (Mesh, ParseMesh, groups, devices), layout.go (Layout, ParseLayout, printing),
// shard.go (local shapes and offsets).
package mesh
