package shm

import (
	"syscall"
	"time"
	"unsafe"
)

// The ring's futex words live in a MAP_SHARED file mapping, so the waits must be the shared
// (not FUTEX_PRIVATE) kind: the waker is another process.
const (
	futexWait = 0
	futexWake = 1
)

// sleepOn blocks while *addr == val, for at most d (or until a wake). Spurious returns are
// fine: every caller re-checks its condition.
func sleepOn(addr *uint32, val uint32, d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait, uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// wakeOn wakes every process sleeping on addr.
func wakeOn(addr *uint32) {
	syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWake, 1<<30, 0, 0, 0)
}
