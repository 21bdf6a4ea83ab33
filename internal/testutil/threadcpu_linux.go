package testutil

import (
	"syscall"
	"unsafe"
)

// ThreadCPU is the CPU time the calling thread has used (Linux's
// CLOCK_THREAD_CPUTIME_ID), in ns. Benchmarks lock their goroutine to its
// thread and report it beside ns/op: on a machine shared with other work
// wall time counts the time the benchmark waited for a core, CPU time not.
func ThreadCPU() int64 {
	const clockThreadCPUTimeID = 3
	return clockNanos(clockThreadCPUTimeID)
}

// ProcessCPU is the CPU time the whole process has used (Linux's
// CLOCK_PROCESS_CPUTIME_ID), in ns: every thread's, for benchmarks that run
// on several goroutines (b.RunParallel), whose work no one thread measures.
func ProcessCPU() int64 {
	const clockProcessCPUTimeID = 2
	return clockNanos(clockProcessCPUTimeID)
}

// clockNanos reads clock id with clock_gettime, in ns (0 if it fails).
func clockNanos(id uintptr) int64 {
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, id, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return ts.Nano()
}
