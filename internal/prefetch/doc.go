// Package prefetch asks the CPU to start loading memory that a caller will
// read soon, so that the load's cache miss overlaps the work before it.
package prefetch
