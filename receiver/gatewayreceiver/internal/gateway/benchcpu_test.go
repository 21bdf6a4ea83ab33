package gateway

import "github.com/otelgateway/otelgateway/internal/testutil"

// threadCPU is the CPU time the calling thread has used, in ns
// (testutil.ThreadCPU): benchmarks report it beside ns/op.
func threadCPU() int64 { return testutil.ThreadCPU() }
