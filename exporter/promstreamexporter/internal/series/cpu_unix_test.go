//go:build unix

package series

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) this process has used. A
// benchmark that allocates nothing runs alone in it, so the difference
// across its loop is that loop's CPU, unlike wall time on a shared machine.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
