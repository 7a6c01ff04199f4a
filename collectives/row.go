package collectives

import (
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/dist"
)

// Row is one case on one world, transport and mode: nccl-tests' columns for the out-of-place
// and in-place calls, the digests, and the verdict. It is what --json writes and what the
// reporter ingests (docs/cli.md, "collectives").
type Row struct {
	Op        string `json:"op"`
	Transport string `json:"transport"`
	Mode      string `json:"mode"`
	World     int    `json:"world"`
	DType     string `json:"dtype"`
	RedOp     string `json:"redop"` // "none" for data movement
	Root      int    `json:"root"`  // -1 for ops without a root, as nccl-tests prints
	Bytes     int64  `json:"bytes"` // nccl-tests' size (Case.Bytes)
	Count     int    `json:"count"`
	// Out of place. Times are the median over the timed calls of the slowest rank's time.
	TimeUS   float64 `json:"time_us"`
	AlgBWGBs float64 `json:"algbw_gbs"`
	BusBWGBs float64 `json:"busbw_gbs"`
	Wrong    int64   `json:"wrong"` // elements that differ from the global answer, all ranks
	// Digest is the SHA-256 over every rank's output digest in rank order: equal digests,
	// equal bits on every rank.
	Digest string `json:"digest"`
	// In place.
	TimeUSIP   float64 `json:"time_us_ip"`
	AlgBWGBsIP float64 `json:"algbw_gbs_ip"`
	BusBWGBsIP float64 `json:"busbw_gbs_ip"`
	WrongIP    int64   `json:"wrong_ip"`
	DigestIP   string  `json:"digest_ip"`
	// RankDigests are the out-of-place output digests of each rank (engine/tensor digests).
	RankDigests []string `json:"rank_digests"`
	// Exact mode, all_reduce: the digest of the same global contributions (Config.Split of
	// them) summed over this world, and its wrong elements. Equal across world sizes.
	SplitDigest string `json:"split_digest,omitempty"`
	SplitWrong  int64  `json:"split_wrong,omitempty"`
	// BitsGuaranteed: the mode promises these bits run after run and transport to transport.
	BitsGuaranteed bool `json:"bits_guaranteed"`
	// OK: no wrong element anywhere and, where bits are guaranteed, the in-place output equal
	// to the out-of-place one and every rank holding the same result where the op says so.
	OK   bool   `json:"ok"`
	Note string `json:"note,omitempty"` // why not OK
	// --vs gloo: torch.distributed's gloo backend on the same world, size and dtype, timed
	// in the same command; Ratio is our out-of-place busbw over gloo's (above 1: we are
	// faster), RatioIP our in-place busbw over gloo's: like with like, since torch.distributed's
	// all_reduce is always in place, its input restored outside the clock as ours is.
	GlooTimeUS   float64 `json:"gloo_time_us,omitempty"`
	GlooBusBWGBs float64 `json:"gloo_busbw_gbs,omitempty"`
	Ratio        float64 `json:"ratio,omitempty"`
	RatioIP      float64 `json:"ratio_ip,omitempty"`
	// Device transports (cuda, nccl): rank 0's device-to-device copy of the row's bytes on its
	// GPU, timed with CUDA events in the same run (median after warm-up), its bandwidth
	// (bytes / time), and busbw over it: the ceiling a one-GPU collective is measured against.
	CopyUS      float64 `json:"copy_us,omitempty"`
	CopyGBs     float64 `json:"copy_gbs,omitempty"`
	BusOverCopy float64 `json:"busbw_over_copy,omitempty"`
	// --compare-host: the digests of the same case, world and mode on the inproc host
	// transport, run in the same command, and whether they equal this row's (out of place and
	// in place). Nil when not compared.
	HostDigest   string `json:"host_digest,omitempty"`
	HostDigestIP string `json:"host_digest_ip,omitempty"`
	HostEqual    *bool  `json:"host_equal,omitempty"`
	// --topology: the modeled fabric the row ran over (fabric.Topology.Spec), its clock
	// (virtual or real), the all_reduce route (flat or hier), the model's time for one call
	// (fabric.Topology.Predict) and whether the row's digests equal the flat route's without
	// the fabric (nil: not compared; fabric.go).
	Topology string  `json:"topology,omitempty"`
	Clock    string  `json:"clock,omitempty"`
	Algo     string  `json:"algo,omitempty"`
	PredUS   float64 `json:"pred_us,omitempty"`
	FlatBits *bool   `json:"flat_bits,omitempty"`
}

// Key identifies a row across runs and transports: everything but the transport.
func (r Row) Key() string {
	return fmt.Sprintf("%s/%s/%s/root%d/%d/w%d/%s", r.Op, r.DType, r.RedOp, r.Root, r.Count, r.World, r.Mode)
}

// Passed reports whether the row's checks held.
func (r Row) Passed() bool { return r.OK }

func buildRow(cs Case, transport string, mode dist.Mode, n int, recs []record) Row {
	row := Row{Op: string(cs.Op), Transport: transport, Mode: mode.String(), World: n, DType: cs.DType.String(),
		RedOp: "none", Root: -1, Bytes: cs.Bytes(n), BitsGuaranteed: mode.BitsGuaranteed()}
	_, _, row.Count = cs.Buffers(n)
	if cs.Op.Reduces() {
		row.RedOp = cs.Red.String()
	}
	if cs.Op.Rooted() {
		row.Root = cs.Root
	}
	var secs, secsIP float64
	outs, ins := make([][32]byte, n), make([][32]byte, n)
	for q, rc := range recs {
		row.Wrong += rc.wrong
		row.WrongIP += rc.wrongIP
		row.SplitWrong += rc.wrongSplit
		secs += rc.secs / float64(n)
		secsIP += rc.secsIP / float64(n)
		outs[q], ins[q] = rc.digest, rc.digestIP
		row.RankDigests = append(row.RankDigests, hex.EncodeToString(rc.digest[:]))
	}
	row.Digest, row.DigestIP = combine(outs), combine(ins)
	row.TimeUS, row.TimeUSIP = secs*1e6, secsIP*1e6
	row.AlgBWGBs, row.BusBWGBs = Bandwidth(cs.Op, n, row.Bytes, secs)
	row.AlgBWGBsIP, row.BusBWGBsIP = Bandwidth(cs.Op, n, row.Bytes, secsIP)
	if c := recs[0].copySecs; c > 0 && row.Bytes > 0 {
		row.CopyUS = c * 1e6
		row.CopyGBs = float64(row.Bytes) / c / 1e9
		if row.BusBWGBs > 0 {
			row.BusOverCopy = row.BusBWGBs / row.CopyGBs
		}
	}

	var notes []string
	if row.Wrong+row.WrongIP+row.SplitWrong > 0 {
		notes = append(notes, fmt.Sprintf("%d wrong elements out of place, %d in place, %d in the split check", row.Wrong, row.WrongIP, row.SplitWrong))
	}
	if recs[0].hasSplit {
		row.SplitDigest = hex.EncodeToString(recs[0].split[:])
		for q, rc := range recs {
			if !rc.hasSplit || rc.split != recs[0].split {
				notes = append(notes, fmt.Sprintf("split check: rank %d's bits differ from rank 0's", q))
				break
			}
		}
	}
	if row.BitsGuaranteed {
		if row.Digest != row.DigestIP {
			notes = append(notes, "in-place bits differ from out-of-place bits")
		}
		// all_reduce, all_gather and broadcast leave the same result on every rank.
		if cs.Op == AllReduce || cs.Op == AllGather || cs.Op == Broadcast {
			for q := 1; q < n; q++ {
				if outs[q] != outs[0] {
					notes = append(notes, fmt.Sprintf("rank %d's result differs from rank 0's", q))
					break
				}
			}
		}
	}
	row.OK = len(notes) == 0
	row.Note = strings.Join(notes, "; ")
	return row
}

// ReportSchema is the version of the collectives JSON document.
const ReportSchema = 1

// ReportKind marks a collectives JSON document (the reporter tells it from a bench report by
// this).
const ReportKind = "tessera-collectives"

// Report is one `tessera-qa collectives` run: its rows and the cross-row checks.
type Report struct {
	Schema      int       `json:"schema"`
	Kind        string    `json:"kind"`
	Started     time.Time `json:"started"`
	Machine     string    `json:"machine,omitempty"`
	DeviceClass string    `json:"device_class"`
	Command     string    `json:"command,omitempty"`
	Seed        uint64    `json:"seed,string"`
	Iters       int       `json:"iters"`
	Warmup      int       `json:"warmup"`
	Passed      bool      `json:"passed"`
	Rows        []Row     `json:"rows"`
	// Checks are the verdicts that compare rows with each other (SplitAgreement, ...).
	Checks []Check `json:"checks,omitempty"`
	// Gloo describes the interpreter --vs gloo ran; Notes what it could not compare (gloo
	// refuses some ops and dtypes).
	Gloo  string   `json:"gloo,omitempty"`
	Notes []string `json:"notes,omitempty"`
	// ModeCost: with several modes in one command, each timed row's time over the first
	// mode's.
	ModeCost []ModeCost `json:"mode_cost,omitempty"`
}

// ModeCost is one row's time in Mode over its time in Base, out of place and in place.
type ModeCost struct {
	Op        string  `json:"op"`
	DType     string  `json:"dtype"`
	RedOp     string  `json:"redop"`
	Transport string  `json:"transport"`
	World     int     `json:"world"`
	Bytes     int64   `json:"bytes"`
	Mode      string  `json:"mode"`
	Base      string  `json:"base"`
	Ratio     float64 `json:"ratio"`    // time in Mode / time in Base, out of place
	RatioIP   float64 `json:"ratio_ip"` // in place
}

// Check is one cross-row verdict.
type Check struct {
	Name   string   `json:"name"`
	Passed bool     `json:"passed"`
	Detail []string `json:"detail,omitempty"` // what disagreed
}

// Finish sets Passed from the rows and checks.
func (r *Report) Finish() {
	r.Passed = true
	for _, x := range r.Rows {
		r.Passed = r.Passed && x.OK
	}
	for _, c := range r.Checks {
		r.Passed = r.Passed && c.Passed
	}
}

// CompareDigests lists the rows of b whose bits differ from a's row with the same Key, or
// that a lacks, among the rows whose mode guarantees bits: the check that two runs, two
// transports or a run with injected delays gave the same bits. Rows of fast mode are skipped.
func CompareDigests(a, b []Row) []string {
	by := map[string]Row{}
	for _, r := range a {
		by[r.Key()] = r
	}
	var out []string
	for _, r := range b {
		if !r.BitsGuaranteed {
			continue
		}
		x, ok := by[r.Key()]
		switch {
		case !ok:
			out = append(out, r.Key()+": missing from the other run")
		case x.Digest != r.Digest || x.DigestIP != r.DigestIP || x.SplitDigest != r.SplitDigest:
			out = append(out, fmt.Sprintf("%s: %s gave %s, %s gave %s", r.Key(), x.Transport, short(x.Digest), r.Transport, short(r.Digest)))
		}
	}
	return out
}

// SplitAgreement lists the exact-mode all_reduce cases whose split digests differ between
// world sizes (rows of any transport; the split check sums the same contributions whatever
// the world). It returns the number of cases compared and the disagreements.
func SplitAgreement(rows []Row) (cases int, bad []string) {
	type seen struct {
		digest string
		world  int
	}
	first := map[string]seen{}
	reported := map[string]bool{}
	var order []string
	for _, r := range rows {
		if r.SplitDigest == "" {
			continue
		}
		k := fmt.Sprintf("%s/%s/%s/%d", r.Op, r.DType, r.RedOp, r.Count)
		s, ok := first[k]
		if !ok {
			first[k] = seen{r.SplitDigest, r.World}
			order = append(order, k)
			continue
		}
		if s.digest != r.SplitDigest && !reported[k] {
			reported[k] = true
			bad = append(bad, fmt.Sprintf("%s: world %d gave %s, world %d gave %s", k, s.world, short(s.digest), r.World, short(r.SplitDigest)))
		}
	}
	return len(order), bad
}

func short(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

// CompareHost puts the digests of host (rows of the inproc host transport for the same cases,
// worlds and modes) beside rows (a device transport's): HostDigest, HostDigestIP and
// HostEqual on every row with a host twin (same Key). A row whose mode guarantees bits and
// whose digests differ from the host's fails (OK false, with a note); fast-mode rows are
// reported, not judged (their bits are not promised). The returned check passes when every
// bit-guaranteed row has a host twin with equal digests.
func CompareHost(rows, host []Row) Check {
	by := map[string]Row{}
	for _, r := range host {
		by[r.Key()] = r
	}
	transport := "device"
	compared, fastDiff := 0, 0
	var bad []string
	for i := range rows {
		r := &rows[i]
		transport = r.Transport
		h, ok := by[r.Key()]
		if !ok {
			if r.BitsGuaranteed {
				bad = append(bad, r.Key()+": no host row to compare with")
			}
			continue
		}
		eq := h.Digest == r.Digest && h.DigestIP == r.DigestIP
		r.HostDigest, r.HostDigestIP, r.HostEqual = h.Digest, h.DigestIP, &eq
		compared++
		switch {
		case eq:
		case r.BitsGuaranteed:
			bad = append(bad, fmt.Sprintf("%s: %s gave %s, %s gave %s", r.Key(), h.Transport, short(h.Digest), r.Transport, short(r.Digest)))
			r.OK = false
			if r.Note != "" {
				r.Note += "; "
			}
			r.Note += "bits differ from the " + h.Transport + " host transport's"
		default:
			fastDiff++
		}
	}
	name := fmt.Sprintf("%s rows: the same bits as the inproc host transport (%d rows compared", transport, compared)
	if fastDiff > 0 {
		name += fmt.Sprintf("; %d fast-mode rows differ, which fast mode allows", fastDiff)
	}
	return Check{Name: name + ")", Passed: len(bad) == 0 && compared > 0, Detail: bad}
}
