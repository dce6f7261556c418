package testprocess

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the process when the test binary dies, so that a test
// killed by its timeout leaves no process holding ports and connections.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
