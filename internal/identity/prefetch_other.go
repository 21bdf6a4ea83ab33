//go:build !amd64

package identity

import "unsafe"

// prefetch is a no-op where there is no assembly for it (see
// prefetch_amd64.go): a hint only, so nothing depends on it.
func prefetch(unsafe.Pointer) {}
