package cumulativeprocessor

import (
	"go.opentelemetry.io/collector/pdata/pmetric"

	ckpt "github.com/otelgateway/otelgateway/internal/checkpoint"
)

// replayScopeAttr (internal/checkpoint.ReplayScopeAttr) marks the scope of a
// window the gateway receiver replays from its checkpoint after a restart (receiver/gatewayreceiver,
// checkpoint.go): a window flushed before the crash that this processor's
// own checkpoint may or may not hold. Points this processor already counted
// (older than the stream's last window) are skipped and counted as
// outcome="replayed", not dropped; the last window comes back as a resend
// (replaced by itself); the others are accumulated as usual. The mark is
// removed so that it never reaches a stream's identity or an exporter.
const replayScopeAttr = ckpt.ReplayScopeAttr

// takeReplayMark removes the replay mark from sm's scope and reports whether
// it was there.
func takeReplayMark(sm pmetric.ScopeMetrics) bool {
	attrs := sm.Scope().Attributes()
	v, ok := attrs.Get(replayScopeAttr)
	if !ok {
		return false
	}
	replay := v.Bool()
	attrs.Remove(replayScopeAttr)
	return replay
}
