package harness

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"

	"github.com/tessera-qa/tessera-qa/engine/graph"
	"github.com/tessera-qa/tessera-qa/engine/tensor"
)

// NilDigest stands for a missing tensor in a digest list, so that a missing output can never
// collide with a real one.
const NilDigest = "nil"

// Digests returns the bitwise digest (tensor.Digest) of each tensor, in order.
func Digests(ts []*tensor.Tensor) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		if t == nil {
			out[i] = NilDigest
			continue
		}
		out[i] = t.Digest()
	}
	return out
}

// CombinedDigest is the hex SHA-256 over the per-tensor digests in order: one string that is
// equal for two runs exactly when every output is bitwise equal, in the same order.
func CombinedDigest(ts []*tensor.Tensor) string { return CombineDigests(Digests(ts)) }

// CombineDigests is CombinedDigest of outputs whose per-tensor digests (Digests) are already
// known, such as digests pinned in a file.
func CombineDigests(digests []string) string {
	h := sha256.New()
	h.Write([]byte("tessera.digests.v1"))
	for _, d := range digests {
		// A separator keeps ["ab","c"] and ["a","bc"] apart.
		h.Write([]byte{'|'})
		h.Write([]byte(d))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ComputationKey names a computation: the hex SHA-256 (first 16 bytes) of the graph's text,
// its input digests by name and the schedule hash. Two results with equal keys ran the same
// program on the same inputs, so on one device class their digests must be equal; results
// under one case name but with different keys (a smoke case drawn by another seed, a golden
// case whose inputs were regenerated) are different computations, never a reproducibility
// regression of each other.
func ComputationKey(g *graph.Graph, inputDigests map[string]string, scheduleHash string) string {
	h := sha256.New()
	h.Write([]byte(graph.Print(g)))
	names := slices.Sorted(maps.Keys(inputDigests))
	for _, n := range names {
		h.Write([]byte("\x00input " + n + "=" + inputDigests[n]))
	}
	h.Write([]byte("\x00schedule " + scheduleHash))
	return hex.EncodeToString(h.Sum(nil)[:16])
}
