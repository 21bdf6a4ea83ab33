package traffic

import (
	"reflect"
	"strconv"
	"testing"

	ckpt "github.com/otelgateway/otelgateway/internal/checkpoint"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// A window's exponential points survive the checkpoint's points section:
// decoded, each has the layout (scale, offset, zero) and counts it was
// encoded with, where the window's buckets keep the layout ahead of the
// counts.
func TestCheckpointPointsKeepExponentialLayout(t *testing.T) {
	prof := otelProfile.withDurationHistograms(nil, defaultExpoMaxSize)
	a := testAggregator(prof, Limits{})
	for i, ms := range []float64{0.001, 3, 1e6, 42} {
		e := otelEvent("kong", "/r"+strconv.Itoa(i%2))
		e.TotalMS, e.UpstreamMS = ms, ms/2
		a.Add([]gateway.Event{e})
	}
	w := a.Take()
	enc := w.AppendPoints(nil, w.Len())
	d := ckpt.Decoder{B: enc}
	got := a.ReadPoints(&d)
	if d.Err != nil || len(d.B) != 0 {
		t.Fatalf("decoding: %v, %d bytes left", d.Err, len(d.B))
	}
	if got.Len() != w.Len() {
		t.Fatalf("%d points decoded, want %d", got.Len(), w.Len())
	}
	expo := 0
	for i := range w.points {
		p := &got.points[i]
		if prof.families[p.fam].expoSize == 0 {
			continue
		}
		expo++
		we, wc := w.points[i].expo(w.buckets)
		ge, gc := p.expo(got.buckets)
		if ge != we || !reflect.DeepEqual(gc, wc) {
			t.Errorf("point %d: decoded %+v %v, want %+v %v", i, ge, gc, we, wc)
		}
	}
	if expo == 0 {
		t.Fatal("no exponential point in the window")
	}
}

// A checkpoint written with one set of metrics is not restored into
// another: the families are part of the fingerprint.
func TestMetricsChangeTheCheckpointFingerprint(t *testing.T) {
	all := New(Settings{Profile: ProfileOTel})
	some := New(Settings{Profile: ProfileOTel, DisabledMetrics: []string{"gateway.bandwidth"}})
	if all.Fingerprint() == some.Fingerprint() {
		t.Fatal("same fingerprint with and without gateway.bandwidth")
	}
	if n := len(some.fams); n != len(otelProfile.families)-2 {
		t.Fatalf("%d families without gateway.bandwidth, want both directions gone (%d)", n, len(otelProfile.families)-2)
	}
	if p := otelProfile.withoutMetrics(nil); p != &otelProfile {
		t.Fatal("withoutMetrics(nil) copied the profile")
	}
}
