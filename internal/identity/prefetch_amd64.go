package identity

import "unsafe"

// prefetch asks the CPU to start loading the cache line at p, without
// waiting for it (PREFETCHT0): a hint that never faults, never blocks and
// never changes what a later load reads. A plain load would stall the
// core once its reorder buffer fills behind the miss, a few hundred
// instructions later; the point a caller prefetches for is thousands away.
//
//go:noescape
func prefetch(p unsafe.Pointer)
