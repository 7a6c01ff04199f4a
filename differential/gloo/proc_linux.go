package gloo

import "syscall"

// procAttr puts a rank in its own process group (so one signal reaches everything it started)
// and has the kernel kill it should this process die without tearing the group down.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
