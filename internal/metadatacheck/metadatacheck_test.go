package metadatacheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestDistributionListsOurComponents holds the distribution's
// metadata.yaml to the metadata.yaml of each of our own components: same
// type, class and per-signal stability.
func TestDistributionListsOurComponents(t *testing.T) {
	const module = "github.com/otelgateway/otelgateway/"
	b, err := os.ReadFile("../../metadata.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var dist struct {
		Components map[string][]struct {
			Name      string            `yaml:"name"`
			Module    string            `yaml:"module"`
			Stability map[string]string `yaml:"stability"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(b, &dist); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for group, list := range dist.Components {
		for _, c := range list {
			dir, ours := strings.CutPrefix(c.Module, module)
			if !ours {
				continue
			}
			seen++
			md := Read(t, filepath.Join("../..", dir, "metadata.yaml"))
			if md.Type != c.Name || md.Status.Class+"s" != group {
				t.Errorf("%s: distribution lists %s %q, its metadata.yaml says %s %q", dir, group, c.Name, md.Status.Class, md.Type)
			}
			want := make(map[string]string)
			for level, signals := range md.Status.Stability {
				for _, s := range signals {
					want[s] = level
				}
			}
			if len(want) != len(c.Stability) {
				t.Errorf("%s: distribution lists stability %v, its metadata.yaml %v", dir, c.Stability, want)
				continue
			}
			for s, l := range c.Stability {
				if want[s] != l {
					t.Errorf("%s: distribution lists stability %v, its metadata.yaml %v", dir, c.Stability, want)
					break
				}
			}
		}
	}
	if seen != 4 {
		t.Errorf("distribution lists %d of our components, want 4 (receiver, processor, exporter, file_storage extension)", seen)
	}
}
