//go:build !linux

package gatewayreceiver

// processCPU is not measured off Linux.
func processCPU() int64 { return 0 }
