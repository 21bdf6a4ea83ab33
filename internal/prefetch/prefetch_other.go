//go:build !amd64

package prefetch

// Line is a no-op where there is no assembly for it (see
// prefetch_amd64.go): a hint only, so nothing depends on it.
func Line(uintptr) {}
