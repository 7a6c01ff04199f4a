package stress

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tessera-qa/tessera-qa/engine/errs"
	"github.com/tessera-qa/tessera-qa/harness"
)

// A loaded run is judged bit for bit against its alone digest: an alone digest one bit away
// (the last hex digit of one output's digest) makes every run of that graph E_NONDETERMINISTIC,
// and the collector counts each as a mismatch that fails the report, while the graph whose
// digest is intact passes every run.
func TestJudgeOneBitOffDigestIsAMismatch(t *testing.T) {
	b := cpu(t)
	p, err := MakePlan(b, 3, 1, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	d := []byte(p.Jobs[0][1].Digest)
	last := strings.IndexByte(string(d), ',') - 1
	if last < 0 {
		last = len(d) - 1
	}
	d[last] ^= 1 // '0'<->'1', 'a'<->'`'...: stays one character, one bit away
	p.Jobs[0][1].Digest = string(d)
	c := &collector{t0: time.Now(), hist: json.NewEncoder(io.Discard), graphs: map[int]*reservoir{}, samples: map[string][]Sample{},
		rep: &Report{}, last: map[string]float64{}}
	var ofBad int
	err = RunJob(context.Background(), JobOptions{Plan: p, Job: 0, Backend: b, Until: time.Now().Add(200 * time.Millisecond), Replays: t.TempDir(),
		Emit: func(e Event) {
			switch {
			case e.Graph == 1 && e.Code != string(errs.Nondeterministic):
				t.Errorf("graph 1 with a digest one bit off: %s %s %s", e.Verdict, e.Code, e.Reason)
			case e.Graph == 0 && e.Verdict != harness.VerdictPass:
				t.Errorf("graph 0 with its own digest: %s %s %s", e.Verdict, e.Code, e.Reason)
			}
			if e.Graph == 1 {
				ofBad++
			}
			c.add("process", e)
		}})
	if err != nil {
		t.Fatal(err)
	}
	if ofBad == 0 || c.rep.Mismatches != ofBad || c.rep.Errors != 0 || len(c.rep.Failures) == 0 {
		t.Fatalf("%d runs of the graph one bit off: mismatches %d, errors %d, failures %v", ofBad, c.rep.Mismatches, c.rep.Errors, c.rep.Failures)
	}
}

// The leak rule at its edge: a floor that rises steadily by 5% more than the allowance over
// the soak leaks, one that rises by 5% less does not, for every monitor's allowance.
func TestJudgeLeakJustPastTheAllowance(t *testing.T) {
	for mon, allow := range Allowances {
		for _, tc := range []struct {
			growth float64
			leak   bool
		}{{1.05, true}, {0.95, false}} {
			// 40 samples in 4 windows of 10: the floors are 0, 10s, 20s, 30s, so the growth of
			// the floor is 30 steps and the growth after the warm-up 20 steps (> half).
			s := tc.growth * allow / 30
			var samples []Sample
			for i := range 40 {
				samples = append(samples, Sample{T: float64(i), Values: map[string]float64{mon: 1000 + float64(i)*s}})
			}
			l := Judge(mon, "p", samples)
			if l.Leak != tc.leak || !l.Monotone {
				t.Errorf("%s: floor growth %.2f x the allowance %g: leak %v (growth %g, late %g), want %v", mon, tc.growth, allow, l.Leak, l.Growth, l.LateGrowth, tc.leak)
			}
		}
	}
}
