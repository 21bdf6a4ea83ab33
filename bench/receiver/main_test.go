package receiver

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that every contender stopped all its goroutines.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
