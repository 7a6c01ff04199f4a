package rdzv

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// MaxNodes bounds how many host names ParseNodeList expands, so that a list such as
// "n[0-999999999]" is an error instead of an allocation of gigabytes.
const MaxNodes = 1 << 16

// ParseNodeList expands a Slurm host list such as "node[01-04,07],gpu-a,rack[1-2]-n[1-2]"
// into host names, in order: comma-separated entries, each a name with zero or more bracket
// groups of comma-separated numbers or ranges lo-hi. A range keeps the zero padding of its
// lower bound (node[08-10] is node08 node09 node10); several groups in one entry give every
// combination, the last group varying fastest. Errors are one E_INPUT line.
func ParseNodeList(s string) ([]string, error) {
	var out []string
	err := walkNodeList(s, func(host string) bool {
		out = append(out, host)
		return true
	})
	return out, err
}

// FirstNode is the first host of a Slurm host list: where task 0 of a step runs, and so
// where rank 0 serves the rendezvous store. The whole list is validated.
func FirstNode(s string) (string, error) {
	var first string
	err := walkNodeList(s, func(host string) bool {
		first = host
		return false
	})
	return first, err
}

// piece is one part of an entry: a literal, or a bracket group's numbers.
type piece struct {
	lit    string
	ranges []numRange // nil for a literal
}

type numRange struct {
	lo, hi uint64
	width  int // digits of the lower bound as written: the zero padding
}

func (r numRange) count() uint64 { return r.hi - r.lo + 1 }

func nodeErr(s, format string, args ...any) error {
	return errs.New(errs.Input, "node list %.80q: %s", s, strings.TrimSpace(fmt.Sprintf(format, args...)))
}

// walkNodeList validates s in full, then calls yield for each host in order until it returns
// false. The total count is checked against MaxNodes before any host is produced.
func walkNodeList(s string, yield func(string) bool) error {
	if s == "" {
		return nodeErr(s, "empty")
	}
	entries, err := splitEntries(s)
	if err != nil {
		return err
	}
	parsed := make([][]piece, len(entries))
	var total uint64
	for i, e := range entries {
		ps, n, err := parseEntry(s, e)
		if err != nil {
			return err
		}
		parsed[i] = ps
		total += n
		if total > MaxNodes {
			return nodeErr(s, "expands to more than %d hosts", MaxNodes)
		}
	}
	for _, ps := range parsed {
		if !expand(ps, "", yield) {
			return nil
		}
	}
	return nil
}

// splitEntries splits at the commas outside brackets and checks bracket balance.
func splitEntries(s string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			if depth > 0 {
				return nil, nodeErr(s, "nested '[' at byte %d", i)
			}
			depth++
		case ']':
			if depth == 0 {
				return nil, nodeErr(s, "']' without '[' at byte %d", i)
			}
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, nodeErr(s, "unclosed '['")
	}
	return append(out, s[start:]), nil
}

func hostByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_'
}

// parseEntry splits one entry into literals and bracket groups and counts its hosts.
func parseEntry(s, e string) ([]piece, uint64, error) {
	if e == "" {
		return nil, 0, nodeErr(s, "empty entry")
	}
	var ps []piece
	n := uint64(1)
	for len(e) > 0 {
		i := strings.IndexByte(e, '[')
		if i < 0 {
			i = len(e)
		}
		for j := 0; j < i; j++ {
			if !hostByte(e[j]) {
				return nil, 0, nodeErr(s, "character %q not allowed in a host name", e[j])
			}
		}
		if i > 0 {
			ps = append(ps, piece{lit: e[:i]})
		}
		if i == len(e) {
			break
		}
		j := strings.IndexByte(e, ']') // splitEntries guarantees one after i, unnested
		rs, err := parseRanges(s, e[i+1:j])
		if err != nil {
			return nil, 0, err
		}
		var c uint64
		for _, r := range rs {
			c += r.count()
			if c > MaxNodes {
				return nil, 0, nodeErr(s, "expands to more than %d hosts", MaxNodes)
			}
		}
		n *= c
		if n > MaxNodes {
			return nil, 0, nodeErr(s, "expands to more than %d hosts", MaxNodes)
		}
		ps = append(ps, piece{ranges: rs})
		e = e[j+1:]
	}
	return ps, n, nil
}

func parseRanges(s, g string) ([]numRange, error) {
	if g == "" {
		return nil, nodeErr(s, "empty brackets")
	}
	var out []numRange
	for _, part := range strings.Split(g, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := parseDigits(s, lo)
		if err != nil {
			return nil, err
		}
		r := numRange{lo: a, hi: a, width: len(lo)}
		if isRange {
			b, err := parseDigits(s, hi)
			if err != nil {
				return nil, err
			}
			if b < a {
				return nil, nodeErr(s, "range %s runs backwards", part)
			}
			if b-a >= MaxNodes {
				return nil, nodeErr(s, "expands to more than %d hosts", MaxNodes)
			}
			r.hi = b
		}
		out = append(out, r)
	}
	return out, nil
}

func parseDigits(s, d string) (uint64, error) {
	if d == "" || len(d) > 18 {
		return 0, nodeErr(s, "bad number %q in brackets", d)
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return 0, nodeErr(s, "bad number %q in brackets", d)
		}
	}
	v, err := strconv.ParseUint(d, 10, 64)
	if err != nil {
		return 0, nodeErr(s, "bad number %q in brackets", d)
	}
	return v, nil
}

// expand yields every host of an entry; false means the caller wants no more.
func expand(ps []piece, prefix string, yield func(string) bool) bool {
	if len(ps) == 0 {
		return yield(prefix)
	}
	p := ps[0]
	if p.ranges == nil {
		return expand(ps[1:], prefix+p.lit, yield)
	}
	for _, r := range p.ranges {
		for v := r.lo; ; v++ {
			num := strconv.FormatUint(v, 10)
			if pad := r.width - len(num); pad > 0 {
				num = strings.Repeat("0", pad) + num
			}
			if !expand(ps[1:], prefix+num, yield) {
				return false
			}
			if v == r.hi {
				break
			}
		}
	}
	return true
}
