package cpu

import (
	"runtime"
	"runtime/debug"
	"sync"

	"golang.org/x/sys/cpu"
)

// deviceClass names everything that decides the CPU backend's bits: the architecture; on
// amd64 whether Go's math.Exp takes its FMA path on this processor (it checks AVX+FMA at
// run time, and the fused polynomial rounds differently); and a GOAMD64 level of v3 or more,
// at which the Go compiler itself fuses x*y+z. Machines that differ in any of these may
// differ in the last bit of exp-based results, so they are different classes.
var deviceClass = sync.OnceValue(func() string {
	c := "cpu/" + runtime.GOARCH
	if runtime.GOARCH != "amd64" {
		return c
	}
	if cpu.X86.HasAVX && cpu.X86.HasFMA {
		c += "+fma"
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "GOAMD64" && s.Value != "" && s.Value != "v1" && s.Value != "v2" {
				c += "/" + s.Value
			}
		}
	}
	return c
})
