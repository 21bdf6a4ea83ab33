package prefetch

// Line starts loading the cache line at addr, without waiting for it
// (PREFETCHT0), and returns at once. It is a hint: it never faults (any
// address will do, a stale or unmapped one included), never blocks and
// never changes what a later load reads. A plain load would not do: the
// core stalls once its reorder buffer fills behind the miss, a few hundred
// instructions later, and the read a caller prefetches for is usually
// thousands away. The address is a uintptr because it need not be a valid
// pointer when it is taken (a racy read of where a structure lives).
func Line(addr uintptr)
