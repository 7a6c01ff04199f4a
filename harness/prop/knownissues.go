package prop

// Engine issues the properties found. Each is worked around in the generator, so that CI
// stays green while it is open; the workaround names the issue, and docs/property.md lists
// them with a reproduction. Fixing one means deleting its workaround and its entry here.
const (
	// IssueFP8InfCopy: the throughput benchmark found that movement ops (transpose,
	// reshape, concat) on fp8e5m2 turn an input ±Inf (0x7C/0xFC) into ±57344: the copy
	// decodes and re-encodes, and encoding saturates, where data movement must keep bit
	// patterns. Workaround: ClassSpecial puts no ±Inf pattern into fp8 inputs.
	IssueFP8InfCopy = "fp8-inf-copy"
	// IssueAttnGradSkipsZeroP: the golden model's attention_grad (engine/ref/grad.go) skips
	// keys whose probability is 0 (masked or underflowed), so a NaN or Inf in dO or V at such
	// a key does not reach the result, where the kernel (and the golden model's own forward
	// attention) computes 0·NaN = NaN: causal f32, q = [1, 1], k = [0, ln2], v = [3, 6],
	// dO = [Inf, 1], wrt v gives [Inf, 2/3] in the golden model and [Inf, NaN] on the CPU
	// backend. Workaround: attention_grad with a NaN in V or dO is not judged (an infinity is
	// not either, for attention's own reason: an underflowed probability).
	IssueAttnGradSkipsZeroP = "attn-grad-skips-zero-p"
)

// workaround reports whether the generator still works around issue.
func workaround(issue string) bool {
	switch issue {
	case IssueFP8InfCopy, IssueAttnGradSkipsZeroP:
		return true
	}
	return false
}
