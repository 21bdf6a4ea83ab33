package traffic

import "testing"

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
