//go:build !linux

package testutil

// ThreadCPU is not measured outside Linux (see threadcpu_linux.go).
func ThreadCPU() int64 { return 0 }

// ProcessCPU is not measured outside Linux (see threadcpu_linux.go).
func ProcessCPU() int64 { return 0 }
