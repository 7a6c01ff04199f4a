package rdzv

import (
	"net"
	"strconv"
	"strings"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// The etcd URL lives here, without etcd's client, so that every program can parse and validate
// TESSERA_RDZV; the store itself is package rdzv/etcd, which programs that want it import.

// DefaultEtcdPrefix is where jobs' keys live when the URL names no prefix.
const DefaultEtcdPrefix = "/tessera/rdzv"

// EtcdURL is a parsed etcd://host:port[,host:port...][/prefix].
type EtcdURL struct {
	Endpoints []string // host:port, at least one
	Prefix    string   // "/a/b", never ending in '/'; DefaultEtcdPrefix when the URL has none
}

func (u EtcdURL) String() string {
	return "etcd://" + strings.Join(u.Endpoints, ",") + u.Prefix
}

const etcdURLForm = "want etcd://host:port[,host:port...][/prefix]"

// ParseEtcdURL reads etcd://host:port[,host:port...][/prefix]. The prefix is one or more
// segments of letters, digits, '.', '_' and '-'. No user, query or fragment. A malformed URL
// is one E_INPUT line.
func ParseEtcdURL(s string) (EtcdURL, error) {
	bad := func(why string) (EtcdURL, error) {
		return EtcdURL{}, errs.New(errs.Input, "etcd URL %.80q: %s; %s", s, why, etcdURLForm)
	}
	if len(s) > 2000 {
		return bad("longer than 2000 bytes")
	}
	rest, ok := strings.CutPrefix(s, "etcd://")
	if !ok {
		return bad("not an etcd:// URL")
	}
	if i := strings.IndexAny(rest, "?#@ \t\r\n"); i >= 0 {
		return bad("unexpected " + strconv.QuoteRune(rune(rest[i])))
	}
	hosts, path, _ := strings.Cut(rest, "/")
	if hosts == "" {
		return bad("no endpoint")
	}
	var u EtcdURL
	seen := map[string]bool{}
	for _, hp := range strings.Split(hosts, ",") {
		host, port, err := net.SplitHostPort(hp)
		if err != nil || host == "" {
			return bad("endpoint " + strconv.Quote(hp) + " is not host:port")
		}
		if _, err := checkHost("etcd endpoint", host); err != nil {
			return bad("endpoint " + strconv.Quote(hp) + " has no valid host")
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 || port != strconv.Itoa(p) {
			return bad("endpoint " + strconv.Quote(hp) + " has no port 1..65535")
		}
		ep := net.JoinHostPort(host, port)
		if seen[ep] {
			return bad("endpoint " + ep + " is named twice")
		}
		seen[ep] = true
		u.Endpoints = append(u.Endpoints, ep)
	}
	path = strings.TrimSuffix(path, "/")
	if path == "" {
		u.Prefix = DefaultEtcdPrefix
		return u, nil
	}
	for _, seg := range strings.Split(path, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return bad("empty, '.' or '..' prefix segment")
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				return bad("prefix byte " + strconv.QuoteRune(rune(c)) + " (want letters, digits, '.', '_', '-')")
			}
		}
	}
	u.Prefix = "/" + path
	return u, nil
}
