package scale

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

// TestMain runs the collector child when EnvChild is set (the parent
// re-executes this test binary), the tests otherwise.
func TestMain(m *testing.M) {
	if js := os.Getenv(EnvChild); js != "" {
		var cfg ChildConfig
		if err := json.Unmarshal([]byte(js), &cfg); err != nil {
			fmt.Fprintln(os.Stderr, "collector child:", err)
			os.Exit(2)
		}
		if err := RunChild(cfg); err != nil {
			fmt.Fprintln(os.Stderr, "collector child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
