package gatewayreceiver

import (
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// TestKongProfileIsKongsTable: the kong profile writes each family with
// the labels, in the order, and with the buckets of the table Kong's pushed
// metrics are mapped by (gateway.KongFamilies, docs/gateways.md §1c), so
// spans, http-log entries and pushed metrics leave as the same families.
func TestKongProfileIsKongsTable(t *testing.T) {
	byName := map[string]*gateway.KongFamily{}
	for i := range gateway.KongFamilies {
		byName[gateway.KongFamilies[i].Name] = &gateway.KongFamilies[i]
	}
	for i := range kongProfile.families {
		f := &kongProfile.families[i]
		want, ok := byName[f.name]
		if !ok {
			t.Errorf("%s: not in gateway.KongFamilies", f.name)
			continue
		}
		if f.desc != want.Help {
			t.Errorf("%s: HELP %q, table %q", f.name, f.desc, want.Help)
		}
		if f.hist && !slices.Equal(f.bounds, want.Bounds) {
			t.Errorf("%s: bounds %v, table %v", f.name, f.bounds, want.Bounds)
		}
		attrs := pcommon.NewMap()
		writeLabels(f, &tupleKey{}, attrs)
		var got []string
		for k := range attrs.All() {
			got = append(got, k)
		}
		if !slices.Equal(got, want.Labels) {
			t.Errorf("%s: labels %v, table %v", f.name, got, want.Labels)
		}
	}
}
