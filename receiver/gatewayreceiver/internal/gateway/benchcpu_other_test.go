//go:build !linux

package gateway

// threadCPU is not measured outside Linux (see benchcpu_linux_test.go).
func threadCPU() int64 { return 0 }
