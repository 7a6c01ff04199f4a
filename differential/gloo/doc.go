// Package gloo runs torch.distributed with the gloo backend in World separate Python processes
// on this machine: an oracle for the engine's collectives (Collective) and the other side of
// `tessera-qa collectives --vs gloo` (Bench).
//
// Index:
//   - Collective: every rank's input in, every rank's output out (gloo.go).
//   - Bench, BenchRow: median wall time per collective and byte size (bench.go).
//   - Probe, Info: can this interpreter run gloo at all (E_NO_DEVICE otherwise) (group.go).
//   - group.go: the process group: start, deadlines, blame, kill; gloo_rank.py: one rank.
//
// # How it runs
//
// Each call makes a temporary directory (Config.WorkDir, removed afterwards) holding the
// embedded rank script, job.json and one .npy input per rank (engine/tensor's writer; 16-bit
// floats as '<u2' bit patterns), and starts World interpreters (Config.Python, else
// $TESSERA_QA_PYTHON, else /usr/bin/python3), each in its own process group. The ranks meet
// through torch's FileStore on a file in that directory, so no port is ever fixed (gloo binds
// ephemeral ports on loopback, GLOO_SOCKET_IFNAME=lo unless set). Each rank reports its
// progress as JSON lines on stdout (hello, rdzv, ready, enter/step per step, done) and writes
// its output as out<rank>.npy.
//
// Every wait has a deadline: Config.Timeout without progress of the slowest rank, and the
// caller's context. A rank that hangs is named as the rank furthest behind ("rank 1 stuck
// before the collective ... (rank 0 in the collective)"); a rank that dies is told apart from
// the peers that then lose their connection to it (the group listens 300 ms more after the
// first failure). The code is E_COMM_INIT while the culprit had not joined the group,
// E_TIMEOUT_COMM after; the message is one line with the culprit's stderr tail. Every rank's
// process group is SIGKILLed and reaped on every path out (Pdeathsig on Linux covers this
// process dying). No torch, no gloo, or no interpreter: E_NO_DEVICE with the reason, as
// package differential reports a missing oracle, so callers can skip.
//
// # What gloo supports (torch 1.13.0a0, Debian python3-torch, CPU; measured 2 ranks)
//
//	                         f64  f32  f16  bf16  int32 int8
//	all_reduce sum/max/min   yes  yes  yes  no    yes   yes   (product too; bf16: "Invalid scalar type")
//	all_reduce avg           no: "Cannot use ReduceOp.AVG with Gloo", for every dtype
//	all_gather (list form)   yes  yes  yes  no*   yes   yes   (all_gather_into_tensor: no _allgather_base)
//	broadcast                yes  yes  yes  no*   yes   yes
//	all_to_all_single        yes  yes  yes  no*   yes   yes   (all_to_all, the list form: no)
//	reduce_scatter           no: neither reduce_scatter nor reduce_scatter_tensor, any dtype
//
// Also measured: int16 and bool are refused like bf16, uint8 and int64 work; all_reduce,
// broadcast and all_to_all_single of an empty tensor work, all_gather of an empty tensor kills
// every rank with SIGFPE.
//
// What this package does with it:
//   - no*: the data-only ops move bf16 as its bytes (uint8, flattened), which gives the exact
//     bits of a memcpy; bf16 reductions are E_UNSUPPORTED.
//   - avg: gloo's sum in the dtype, then divided by the world size in float64 on the Go side
//     and rounded once to the dtype (float dtypes). The sum was already rounded in the dtype at
//     each of gloo's additions (f16 in f16: it can overflow where the engine's f32
//     accumulation does not). Integer avg is E_UNSUPPORTED (the integer sum may have wrapped).
//   - all_to_all is torch's all_to_all_single with equal splits of dim 0.
//   - reduce_scatter and every refusal are tried on the real group and gloo's own refusal comes
//     back as E_UNSUPPORTED (so a newer torch that has them just works); a refusal is
//     remembered per interpreter, so asking again answers at once.
//   - empty all_gather, fp8 and bool: E_UNSUPPORTED before anything starts.
//
// Gloo's sum order is its own, not rank order 0..n-1, and each addition rounds to the dtype
// (measured, f16 on 3 ranks: every element is (r1 + r2) + r0 rounded to f16 at each step, so
// 2048+1+1 gives 2050 or 2048 depending on which rank holds the 2048, and 65504+65504-65504
// gives 65504 rather than inf). Float sums thus agree with a float64 sum within rounding, not
// bitwise with the engine's deterministic mode; max, min, integer sums and the data-only ops
// are exact.
//
// # How Bench times
//
// One group for all sizes. Per size: fresh random inputs (seeded per rank, never zeros),
// Config.Warmup untimed repetitions, then Config.Iters (>= 20) timed ones. Each repetition:
// the in-place ops get their input back (outside the clock), dist.barrier(), then every rank
// times the call alone with time.perf_counter. A repetition's time is its slowest rank's;
// Seconds is the median over repetitions, P10 and P90 the spread (nearest rank). Bytes and
// Count follow nccl-tests' "size" (the op's whole buffer); bandwidths are left to the caller,
// so the engine and gloo go through one formula.
package gloo
