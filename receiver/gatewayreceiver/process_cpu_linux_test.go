package gatewayreceiver

import "syscall"

// processCPU is the process's user and system CPU time in ns (every
// thread: the garbage collector's workers too).
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
