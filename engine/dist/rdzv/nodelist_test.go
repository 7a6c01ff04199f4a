package rdzv

import (
	"slices"
	"strings"
	"testing"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

func TestParseNodeList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"node01", []string{"node01"}},
		{"a,b,c", []string{"a", "b", "c"}},
		{"node[01-04,07]", []string{"node01", "node02", "node03", "node04", "node07"}},
		{"node[8-10]", []string{"node8", "node9", "node10"}},
		{"node[08-10]", []string{"node08", "node09", "node10"}},
		{"gpu[1-2],cpu-x.y,n[3]", []string{"gpu1", "gpu2", "cpu-x.y", "n3"}},
		{"rack[1-2]-n[1-2]", []string{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}},
		{"[5-6]", []string{"5", "6"}},
		{"n[007]", []string{"n007"}},
		{"n[98-100]x", []string{"n98x", "n99x", "n100x"}},
	} {
		got, err := ParseNodeList(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParseNodeList(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
		first, err := FirstNode(c.in)
		if err != nil || first != c.want[0] {
			t.Errorf("FirstNode(%q) = %q, %v; want %q", c.in, first, err, c.want[0])
		}
	}
}

func TestParseNodeListErrors(t *testing.T) {
	for _, in := range []string{"", ",", "a,,b", "node[", "node]", "node[1-", "node[]", "node[1-2", "n[[1]]",
		"n[a-b]", "n[3-1]", "n[1,]", "n[-1]", "no de", "n[1-2]x]", "n[0-99999999]", "a[0-300]b[0-300]", "n[1+2]", "é"} {
		_, err := ParseNodeList(in)
		if errs.CodeOf(err) != errs.Input || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseNodeList(%q): err %v, want one E_INPUT line", in, err)
		}
		if _, err := FirstNode(in); errs.CodeOf(err) != errs.Input {
			t.Errorf("FirstNode(%q): err %v, want E_INPUT (the whole list is validated)", in, err)
		}
	}
}

func FuzzNodeList(f *testing.F) {
	for _, s := range []string{"node[01-04,07]", "a,b", "rack[1-2]-n[1-2]", "n[98-100]x", "x[", "[1-3]", "a[0-65535]", "n[09-1]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hosts, err := ParseNodeList(s)
		first, ferr := FirstNode(s)
		if (err == nil) != (ferr == nil) {
			t.Fatalf("ParseNodeList and FirstNode disagree on %q: %v vs %v", s, err, ferr)
		}
		if err != nil {
			if errs.CodeOf(err) != errs.Input || strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("%q: error %q is not one E_INPUT line", s, err)
			}
			return
		}
		if len(hosts) == 0 || len(hosts) > MaxNodes || first != hosts[0] {
			t.Fatalf("%q: %d hosts, first %q vs %q", s, len(hosts), first, hosts[0])
		}
		for _, h := range hosts {
			if h == "" || strings.ContainsAny(h, "[],") {
				t.Fatalf("%q expanded to host %q", s, h)
			}
		}
		// Expanded hosts are plain names: listing them again gives the same list.
		again, err := ParseNodeList(strings.Join(hosts, ","))
		if err != nil || !slices.Equal(again, hosts) {
			t.Fatalf("%q: re-parsing the expansion gave %v, %v", s, again, err)
		}
	})
}
