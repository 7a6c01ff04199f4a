package launch

import "syscall"

// procAttr puts a rank in its own process group (so a signal reaches everything it started)
// and has the kernel kill it should the launcher die without tearing down.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
