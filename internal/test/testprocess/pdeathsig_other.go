//go:build !linux

package testprocess

import "syscall"

// dieWithParent does nothing where the kernel offers no parent-death signal.
func dieWithParent(*syscall.SysProcAttr) {}
