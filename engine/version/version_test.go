package version

import (
	"strings"
	"testing"
)

func TestCommit(t *testing.T) {
	c := Commit()
	if c == "" || strings.ContainsAny(c, " \n\t") {
		t.Fatalf("Commit() = %q, want one word", c)
	}
	if Commit() != c {
		t.Error("Commit() changed between calls")
	}
}
