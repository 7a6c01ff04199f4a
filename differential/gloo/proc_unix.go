//go:build unix

package gloo

import "syscall"

// killGroup sends SIGKILL to the process group led by pid (each rank leads its own).
func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }
