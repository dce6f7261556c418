package testprocess

import "syscall"

// dieWithParent has the kernel kill the process when the test binary dies, so that a test
// killed by its timeout leaves no process holding ports and connections.
func dieWithParent(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
