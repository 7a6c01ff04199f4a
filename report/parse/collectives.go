package parse

import (
	"strconv"
	"strings"
	"time"

	"github.com/tessera-qa/tessera-qa/harness"
	"github.com/tessera-qa/tessera-qa/report/store"
)

// CollectivesSchema and CollectivesKind mark what `tessera-qa collectives --json` writes
// (package collectives' Report; docs/cli.md, "collectives").
const (
	CollectivesSchema = 1
	CollectivesKind   = "tessera-collectives"
)

// CollectivesReport is the reporter's reading of a collectives report: the fields it stores.
type CollectivesReport struct {
	Schema      int               `json:"schema"`
	Kind        string            `json:"kind"`
	Started     time.Time         `json:"started"`
	Machine     string            `json:"machine,omitempty"`
	DeviceClass string            `json:"device_class"`
	Command     string            `json:"command,omitempty"`
	Seed        uint64            `json:"seed,string"`
	Rows        []CollectivesRow  `json:"rows"`
	Env         map[string]string `json:"env,omitempty"`
}

// CollectivesRow is one row: one case on one world, transport and mode.
type CollectivesRow struct {
	Op             string  `json:"op"`
	Transport      string  `json:"transport"`
	Mode           string  `json:"mode"`
	World          int     `json:"world"`
	DType          string  `json:"dtype"`
	RedOp          string  `json:"redop"`
	Root           int     `json:"root"`
	Bytes          int64   `json:"bytes"`
	Count          int64   `json:"count"`
	TimeUS         float64 `json:"time_us"`
	AlgBWGBs       float64 `json:"algbw_gbs"`
	BusBWGBs       float64 `json:"busbw_gbs"`
	Wrong          int64   `json:"wrong"`
	Digest         string  `json:"digest"`
	TimeUSIP       float64 `json:"time_us_ip"`
	BusBWGBsIP     float64 `json:"busbw_gbs_ip"`
	WrongIP        int64   `json:"wrong_ip"`
	DigestIP       string  `json:"digest_ip"`
	SplitDigest    string  `json:"split_digest"`
	SplitWrong     int64   `json:"split_wrong"`
	BitsGuaranteed bool    `json:"bits_guaranteed"`
	OK             *bool   `json:"ok"`
	Note           string  `json:"note"`
	GlooTimeUS     float64 `json:"gloo_time_us"`
	GlooBusBWGBs   float64 `json:"gloo_busbw_gbs"`
	Ratio          float64 `json:"ratio"`
}

// Where collectives rows go in the store:
//
//   - results (suite "collectives"): one per row, case "op/dtype/redop/root/count/wN/transport/mode",
//     pass when the row is OK, the row's digest, determinism "bitwise" where the mode
//     guarantees bits (so the reproducibility tracker follows them run to run);
//   - metrics (kind "collectives"): one per timed row, name CollectivesSeries(...), metric
//     "busbw_gbs@BYTES", unit GB/s: the dashboard's busbw-vs-size page;
//   - bench: rows measured against gloo (--vs gloo), as a series "collectives/op/redop/mode" on
//     device "CLASS/transport/wN" whose value is our time over gloo's (the bench convention:
//     a ratio measured in one run, lower is better), out of place, and ".../in-place" for our
//     in-place time over gloo's (like with like: torch.distributed's calls are in place).
const (
	CollectivesSuite  = "collectives"
	CollectivesMetric = "collectives"
	busbwPrefix       = "busbw_gbs@"
)

// CollectivesSeries names one busbw-vs-size series of the metrics table: op, dtype and
// reduction, then transport, mode and world, joined by '/'.
func CollectivesSeries(op, dtype, redop, transport, mode string, world int) string {
	return strings.Join([]string{op, dtype, redop, transport, mode, strconv.Itoa(world)}, "/")
}

// SplitCollectivesSeries reads a name made by CollectivesSeries.
func SplitCollectivesSeries(name string) (op, dtype, redop, transport, mode string, world int, ok bool) {
	f := strings.Split(name, "/")
	if len(f) != 6 {
		return "", "", "", "", "", 0, false
	}
	w, err := strconv.Atoi(f[5])
	if err != nil || w < 1 {
		return "", "", "", "", "", 0, false
	}
	return f[0], f[1], f[2], f[3], f[4], w, true
}

// BusBWSize reads the byte size out of a collectives metric name ("busbw_gbs@4096").
func BusBWSize(metric string) (int64, bool) {
	s, ok := strings.CutPrefix(metric, busbwPrefix)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil && v >= 0
}

func parseCollectives(file string, data []byte, doc bool) (*Report, error) {
	var rep CollectivesReport
	var err error
	if doc {
		err = decodeStrict(file, data, &rep)
	} else {
		err = decodeStrict(file, data, &rep.Rows)
		rep.Schema, rep.Kind = CollectivesSchema, CollectivesKind
	}
	if err != nil {
		return nil, err
	}
	c := NewChecker(file)
	if rep.Schema != CollectivesSchema || rep.Kind != CollectivesKind {
		c.failf("collectives schema %d kind %q, this build reads schema %d kind %q", rep.Schema, clip(rep.Kind), CollectivesSchema, CollectivesKind)
		return nil, c.err
	}
	if len(rep.Rows) == 0 {
		c.failf("no collectives rows")
		return nil, c.err
	}
	if len(rep.Rows) > MaxRows {
		c.failf("%d collectives rows (limit %d)", len(rep.Rows), MaxRows)
		return nil, c.err
	}
	c.ident("header", "machine", rep.Machine, false)
	class := c.ident("header", "device_class", rep.DeviceClass, false)
	if class == "" {
		class = "unknown"
	}
	env := map[string]string{}
	for k, v := range rep.Env {
		env[c.ident("env", "key", k, true)] = text(v)
	}
	if rep.Command != "" {
		env["command"] = text(rep.Command)
	}
	env["seed"] = strconv.FormatUint(rep.Seed, 10)
	p := &Report{Kind: "collectives"}
	p.Batch.Run = store.RunRow{Machine: rep.Machine, DeviceClass: class, Started: rep.Started, Env: jsonString(env)}
	seen := map[string]bool{}
	for i, r := range rep.Rows {
		where := "row " + strconv.Itoa(i)
		for _, f := range []struct{ name, v string }{{"op", r.Op}, {"transport", r.Transport}, {"mode", r.Mode}, {"dtype", r.DType}, {"redop", r.RedOp}} {
			c.ident(where, f.name, f.v, true)
			if strings.Contains(f.v, "/") {
				c.failf("%s: %s %q contains '/'", where, f.name, clip(f.v))
			}
		}
		for _, f := range []struct {
			name string
			v    float64
		}{{"time_us", r.TimeUS}, {"algbw_gbs", r.AlgBWGBs}, {"busbw_gbs", r.BusBWGBs}, {"time_us_ip", r.TimeUSIP}, {"busbw_gbs_ip", r.BusBWGBsIP},
			{"gloo_time_us", r.GlooTimeUS}, {"gloo_busbw_gbs", r.GlooBusBWGBs}, {"ratio", r.Ratio}} {
			c.num(where, f.name, f.v)
		}
		switch {
		case r.World < 1 || r.World > 1<<16:
			c.failf("%s: world %d out of range", where, r.World)
		case r.Bytes < 0 || r.Bytes > 1<<40 || r.Count < 0 || r.Count > 1<<40:
			c.failf("%s: bytes %d or count %d out of range", where, r.Bytes, r.Count)
		case r.Wrong < 0 || r.WrongIP < 0 || r.SplitWrong < 0:
			c.failf("%s: a negative #wrong", where)
		case r.Root < -1 || r.Root >= r.World:
			c.failf("%s: root %d outside world %d", where, r.Root, r.World)
		case r.Digest == "":
			c.failf("%s: digest is missing", where)
		}
		c.hex(where, "digest", r.Digest)
		c.hex(where, "digest_ip", r.DigestIP)
		c.hex(where, "split_digest", r.SplitDigest)
		if c.err != nil {
			return nil, c.err
		}
		name := strings.Join([]string{r.Op, r.DType, r.RedOp, "root" + strconv.Itoa(r.Root), strconv.FormatInt(r.Count, 10),
			"w" + strconv.Itoa(r.World), r.Transport, r.Mode}, "/")
		if seen[name] {
			c.failf("%s: a second row for %s", where, clip(name))
			return nil, c.err
		}
		seen[name] = true
		ok := r.Wrong == 0 && r.WrongIP == 0 && r.SplitWrong == 0
		if r.OK != nil {
			ok = ok && *r.OK
		}
		det := harness.DeterminismUnknown
		if r.BitsGuaranteed {
			det = harness.DeterminismBitwise
		}
		res := store.ResultRow{Suite: CollectivesSuite, Case: name, DeviceClass: class, Determinism: det,
			Backend: "dist/" + r.Transport, Device: r.Transport + " x" + strconv.Itoa(r.World), Verdict: harness.VerdictPass,
			Digest: r.Digest, Seed: strconv.FormatUint(rep.Seed, 10), TotalMS: (r.TimeUS + r.TimeUSIP) / 1000}
		if !ok {
			res.Verdict = harness.VerdictFail
			res.Reason = text(r.Note)
			if res.Reason == "" {
				res.Reason = "wrong elements: " + strconv.FormatInt(r.Wrong, 10) + " out of place, " + strconv.FormatInt(r.WrongIP, 10) + " in place"
			}
		}
		p.Batch.Results = append(p.Batch.Results, res)
		verdict := res.Verdict
		if r.TimeUS > 0 && r.Bytes > 0 {
			p.Batch.Metrics = append(p.Batch.Metrics, store.MetricRow{Kind: CollectivesMetric,
				Name:   CollectivesSeries(r.Op, r.DType, r.RedOp, r.Transport, r.Mode, r.World),
				Metric: busbwPrefix + strconv.FormatInt(r.Bytes, 10), Unit: "GB/s", Value: r.BusBWGBs, Verdict: verdict,
				Note: "time " + strconv.FormatFloat(r.TimeUS, 'f', 2, 64) + " us, algbw " + strconv.FormatFloat(r.AlgBWGBs, 'f', 3, 64) + " GB/s"})
		}
		// Against gloo: out of place, and in place (like with like: gloo's calls are in place).
		for _, pl := range []struct {
			suffix string
			us, bw float64
		}{{"", r.TimeUS, r.BusBWGBs}, {"/in-place", r.TimeUSIP, r.BusBWGBsIP}} {
			if r.GlooTimeUS <= 0 || pl.us <= 0 {
				continue
			}
			ratio := pl.us / r.GlooTimeUS
			p.Batch.Bench = append(p.Batch.Bench, store.BenchRow{
				Key: store.SeriesKey{Benchmark: "collectives/" + r.Op + "/" + r.RedOp + "/" + r.Mode + pl.suffix,
					Device: class + "/" + r.Transport + "/w" + strconv.Itoa(r.World), DType: r.DType, Shape: strconv.FormatInt(r.Bytes, 10) + "B"},
				Unit: "ratio", Value: ratio, EngineMS: pl.us / 1000, RefMS: r.GlooTimeUS / 1000, Ratio: ratio, GBps: pl.bw})
		}
	}
	p.Batch.Suites = resultSuites(p.Batch.Results)
	return p, nil
}
