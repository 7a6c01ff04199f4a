// Package rewrite_test is the rewrite suite (issue 13): for every graph rewrite of the
// compiler (canonicalize, fuse-attention, fuse-elementwise), graphs it must rewrite and near
// misses it must leave alone (rewrite), checked on the dump after the pass and by
// running the program with and without the rewrite and against engine/ref; then random
// candidates drawn with each matcher condition held or failed. A matcher that forgets a
// condition (a transpose flag, an axis, a dtype, a second reader) rewrites a near miss here.
package rewrite_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestRewrite(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Rewrite Suite")
}
