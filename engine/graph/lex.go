package graph

import (
	"fmt"
	"strconv"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// The lexer of the text format. Newlines are tokens because the format is one statement per
// line; everything else between tokens (spaces, tabs, '\r', '#' comments) is skipped.
// Tokens are produced one at a time so a 16 MiB file never exists as a token slice.

type tokKind uint8

const (
	tEOF    tokKind = iota
	tNL             // end of line
	tIdent          // [A-Za-z_][A-Za-z0-9_.]*
	tValue          // %name; text is the name without '%'
	tInt            // -?[0-9]+
	tFloat          // has '.', an exponent, or is -inf (inf and nan lex as identifiers)
	tString         // "..." with Go escapes; text is the decoded string
	tPunct          // one of { } ( ) [ ] , : =
)

type token struct {
	kind      tokKind
	text      string
	line, col int // 1-based; col counts runes
}

// is reports whether t is the punctuation or identifier s.
func (t token) is(s string) bool { return (t.kind == tPunct || t.kind == tIdent) && t.text == s }

// describe names a token for "expected X, got Y" messages.
func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of file"
	case tNL:
		return "end of line"
	case tValue:
		return "%" + t.text
	case tString:
		return "string " + strconv.Quote(t.text)
	case tPunct:
		return "'" + t.text + "'"
	}
	return strconv.Quote(t.text)
}

type lexer struct {
	src       string
	file      string
	off       int
	line, col int
}

func newLexer(src, file string) *lexer { return &lexer{src: src, file: file, line: 1, col: 1} }

func (l *lexer) peekByte(k int) byte {
	if l.off+k < len(l.src) {
		return l.src[l.off+k]
	}
	return 0
}

// advance consumes n bytes; columns count runes, so UTF-8 continuation bytes do not move it.
func (l *lexer) advance(n int) {
	for range n {
		c := l.src[l.off]
		l.off++
		switch {
		case c == '\n':
			l.line, l.col = l.line+1, 1
		case c&0xC0 != 0x80:
			l.col++
		}
	}
}

func (l *lexer) errorf(line, col int, format string, args ...any) error {
	return errs.New(errs.Parse, "%s:%d:%d: %s", l.file, line, col, fmt.Sprintf(format, args...))
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' }
func isIdentPart(c byte) bool  { return isIdentStart(c) || isDigit(c) || c == '.' }
func isDigit(c byte) bool      { return c >= '0' && c <= '9' }

func (l *lexer) next() (token, error) {
	for l.off < len(l.src) {
		c := l.src[l.off]
		if c == ' ' || c == '\t' || c == '\r' {
			l.advance(1)
			continue
		}
		if c == '#' {
			for l.off < len(l.src) && l.src[l.off] != '\n' {
				l.advance(1)
			}
			continue
		}
		break
	}
	t := token{line: l.line, col: l.col}
	if l.off >= len(l.src) {
		return t, nil
	}
	c := l.src[l.off]
	switch {
	case c == '\n':
		l.advance(1)
		t.kind = tNL
	case isIdentStart(c):
		t.kind, t.text = tIdent, l.ident()
	case c == '%':
		l.advance(1)
		if !isIdentStart(l.peekByte(0)) {
			return t, l.errorf(t.line, t.col, "expected a value name after '%%' (names are [A-Za-z_][A-Za-z0-9_.]*)")
		}
		t.kind, t.text = tValue, l.ident()
	case isDigit(c) || c == '-' && isDigit(l.peekByte(1)):
		return l.number(t)
	case c == '-' && l.src[l.off+1:min(len(l.src), l.off+4)] == "inf" && !isIdentPart(l.peekByte(4)):
		l.advance(4)
		t.kind, t.text = tFloat, "-inf"
	case c == '"':
		return l.str(t)
	case c == '{' || c == '}' || c == '(' || c == ')' || c == '[' || c == ']' || c == ',' || c == ':' || c == '=':
		l.advance(1)
		t.kind, t.text = tPunct, string(c)
	default:
		return t, l.errorf(t.line, t.col, "unexpected character %q", l.src[l.off:l.off+runeLen(l.src[l.off:])])
	}
	return t, nil
}

func (l *lexer) ident() string {
	start := l.off
	for l.off < len(l.src) && isIdentPart(l.src[l.off]) {
		l.advance(1)
	}
	return l.src[start:l.off]
}

func (l *lexer) digits() int {
	n := 0
	for isDigit(l.peekByte(0)) {
		l.advance(1)
		n++
	}
	return n
}

// number scans -?digits[.digits][(e|E)[+-]digits]. A number glued to letters or a second '.'
// is an error here rather than two tokens, so "1.2.3" and "4x" are reported where they are.
func (l *lexer) number(t token) (token, error) {
	start := l.off
	if l.peekByte(0) == '-' {
		l.advance(1)
	}
	l.digits()
	t.kind = tInt
	if l.peekByte(0) == '.' {
		l.advance(1)
		l.digits()
		t.kind = tFloat
	}
	if c := l.peekByte(0); c == 'e' || c == 'E' {
		l.advance(1)
		if c := l.peekByte(0); c == '+' || c == '-' {
			l.advance(1)
		}
		if l.digits() == 0 {
			return t, l.errorf(t.line, t.col, "malformed number %q: exponent needs digits", l.src[start:l.off])
		}
		t.kind = tFloat
	}
	if isIdentPart(l.peekByte(0)) {
		for isIdentPart(l.peekByte(0)) {
			l.advance(1)
		}
		return t, l.errorf(t.line, t.col, "malformed number %q", l.src[start:l.off])
	}
	t.text = l.src[start:l.off]
	return t, nil
}

// str scans a double-quoted string on one line and decodes Go escapes with strconv.Unquote.
func (l *lexer) str(t token) (token, error) {
	start := l.off
	l.advance(1)
	for {
		if l.off >= len(l.src) || l.src[l.off] == '\n' {
			return t, l.errorf(t.line, t.col, "unterminated string (a string ends with '\"' on the same line)")
		}
		c := l.src[l.off]
		if c == '\\' && l.off+1 < len(l.src) && l.src[l.off+1] != '\n' {
			l.advance(2)
			continue
		}
		l.advance(1)
		if c == '"' {
			break
		}
	}
	s, err := strconv.Unquote(l.src[start:l.off])
	if err != nil {
		return t, l.errorf(t.line, t.col, "bad string literal %s: invalid escape", l.src[start:l.off])
	}
	t.kind, t.text = tString, s
	return t, nil
}

func runeLen(s string) int {
	for i := 1; i < len(s) && i < 4; i++ {
		if s[i]&0xC0 != 0x80 {
			return i
		}
	}
	return min(len(s), 4)
}
