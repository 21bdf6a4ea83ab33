package traffic

import (
	"slices"
	"testing"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// TestKongPerConsumer: the consumer label is the username only with
// per_consumer, as Kong's plugin fills it only `if conf.per_consumer` (off
// by default).
func TestKongPerConsumer(t *testing.T) {
	e := otelEvent("kong", "/orders")
	e.Consumer = "alice"
	for _, per := range []bool{false, true} {
		k, ok := kongKey(&e, &Dimensions{PerConsumer: per})
		want := ""
		if per {
			want = "alice"
		}
		if !ok || k.consumer != want {
			t.Errorf("per_consumer %v: consumer %q, want %q", per, k.consumer, want)
		}
	}
}

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
		writeLabels(f, &tuple{}, attrs)
		var got []string
		for k := range attrs.All() {
			got = append(got, k)
		}
		if !slices.Equal(got, want.Labels) {
			t.Errorf("%s: labels %v, table %v", f.name, got, want.Labels)
		}
	}
}
