package distribution

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no sender, sampler or process-wait goroutine outlives
// the report.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
