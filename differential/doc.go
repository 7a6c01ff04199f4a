// Package differential checks the engine against an independent framework: PyTorch or JAX,
// running as a long-lived oracle process that speaks a line protocol (docs/differential.md).
//
// Index:
//   - Start, Oracle, Config, Target: find an interpreter that imports the framework, start the
//     embedded oracle script (oracles/*.py, go:embed) once, and send it batched requests, each
//     under a timeout; a hung or crashed oracle is a coded error (E_TIMEOUT, E_INPUT) naming
//     the ops of the request, and the next request starts a fresh process (oracle.go,
//     process.go, python.go, embed.go).
//   - WireCase, WireTensor, WireNode, WireResult, Hello: the protocol's messages; tensors
//     travel as little-endian bytes with explicit dtype and shape (wire.go).
//   - Prepare, Prepared, Transport: a graph and its inputs as a wire case, fp8 handled by exact
//     f32 upcast (outputs rounded back by numerics.Encode) or as raw bytes (prepare.go).
//   - Cases, Runner, Outcome: golden catalogue specs x seeds, run on an engine backend and on
//     the oracle, compared by harness.Check under each spec's tolerance (run.go).
//   - Summarize, Row: one row per (op, dtype) with max abs/rel error, ULP and verdict
//     (report.go).
//   - VJP, PrepareVJP, Prepared.DecodeVJP, WireGrad: gradients of a graph by torch.autograd or
//     jax.vjp, in f64 by default (single.go, prepare.go).
//   - Mapping, AheadOfRegistry, TorchGradRules: what each oracle computes per op, where
//     semantics differ, and torch's measured gradients at ties, zeros and NaN (mapping.go).
package differential
