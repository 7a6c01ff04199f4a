// Package sharded_test checks sharded execution (issue 9, item 7): catalogue graphs run
// data-parallel and tensor-parallel on 1, 2 and 4 in-process ranks agree with the same graph on
// one device within tolerance, agree with the golden model of the rank program on every rank,
// and give the same bits run after run; plus the seeds' two mesh examples through the Go API,
// and the pencil 2-D FFT (issue 26) against one rank bit for bit and the float64 definition.
package sharded_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestSharded(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Sharded Suite")
}
