//go:build unix

package launch

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// signalGroup sends sig to the process group led by pid; a group that is gone is not an error.
func signalGroup(pid int, sig syscall.Signal) {
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		syscall.Kill(pid, sig)
	}
}

// Alive reports whether process pid exists and is not a zombie (exited, not yet reaped).
func Alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !os.IsNotExist(err)
	}
	// The state follows the parenthesised command name, which may itself contain ')'.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}
