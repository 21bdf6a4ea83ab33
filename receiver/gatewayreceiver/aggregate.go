package gatewayreceiver

import (
	"strings"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
)

// The request counter the receiver emits, named after the HTTP semantic
// conventions' attribute set; the Prometheus name is gateway_requests_total.
const (
	metricRequests     = "gateway.requests"
	metricRequestsUnit = "{request}"
	metricRequestsDesc = "Requests proxied by the gateway, counted from its root SERVER spans."

	attrRoute      = "http.route"
	attrMethod     = "http.request.method"
	attrStatusCode = "http.response.status_code"
)

// requestKey is the label tuple one request is counted under. Its strings are
// owned by the aggregator (cloned on insert), never borrowed from pdata.
type requestKey struct {
	namespace, service, route, method string
	status                            int64
}

// counted is one label tuple and its count in the current window.
type counted struct {
	key requestKey
	n   uint64
}

// aggregator counts requests per label tuple over one flush window.
//
// Concurrency: add and take may be called from any goroutine; they serialise
// on mu, which is held only for map updates and a copy of the counts, never
// while pdata is built or sent downstream.
type aggregator struct {
	mu sync.Mutex
	// counts keeps an entry per tuple seen in the current or previous window,
	// so steady traffic never reallocates keys; take drops the entries that
	// stayed at zero for a whole window, which bounds the map by the tuples
	// active in two consecutive windows.
	counts map[requestKey]*uint64
	// snapshot is reused by take to avoid allocating per flush.
	snapshot []counted
}

func newAggregator() *aggregator {
	return &aggregator{counts: make(map[requestKey]*uint64)}
}

// addLocked counts one request; the caller holds a.mu.
func (a *aggregator) addLocked(r gateway.Request) {
	k := requestKey{namespace: r.Namespace, service: r.Service, route: r.Route, method: r.Method, status: r.StatusCode}
	if n := a.counts[k]; n != nil {
		*n++
		return
	}
	// First sighting: copy the strings out of the request's buffer.
	k.namespace, k.service = strings.Clone(k.namespace), strings.Clone(k.service)
	k.route, k.method = strings.Clone(k.route), strings.Clone(k.method)
	n := uint64(1)
	a.counts[k] = &n
}

// merge adds counts back, used when a flush failed with a retryable error.
func (a *aggregator) merge(items []counted) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, it := range items {
		if n := a.counts[it.key]; n != nil {
			*n += it.n
			continue
		}
		n := it.n
		a.counts[it.key] = &n
	}
}

// take returns the counts of the window that just ended and starts a new one.
// The returned slice is reused by the next call.
func (a *aggregator) take() []counted {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.snapshot = a.snapshot[:0]
	for k, n := range a.counts {
		if *n == 0 {
			delete(a.counts, k)
			continue
		}
		a.snapshot = append(a.snapshot, counted{key: k, n: *n})
		*n = 0
	}
	return a.snapshot
}

// gatewayID is the resource a request count is reported under.
type gatewayID struct{ namespace, service string }

// toMetrics renders one window as delta monotonic sums, one ResourceMetrics
// per gateway (service.namespace, service.name).
func toMetrics(items []counted, start, now pcommon.Timestamp) pmetric.Metrics {
	md := pmetric.NewMetrics()
	byGateway := make(map[gatewayID]pmetric.NumberDataPointSlice)
	for _, it := range items {
		id := gatewayID{it.key.namespace, it.key.service}
		dps, ok := byGateway[id]
		if !ok {
			dps = newRequestsMetric(md, id)
			byGateway[id] = dps
		}
		dp := dps.AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(now)
		dp.SetIntValue(int64(it.n))
		attrs := dp.Attributes()
		if it.key.route != "" {
			attrs.PutStr(attrRoute, it.key.route)
		}
		if it.key.method != "" {
			attrs.PutStr(attrMethod, it.key.method)
		}
		if it.key.status != 0 {
			attrs.PutInt(attrStatusCode, it.key.status)
		}
	}
	return md
}

func newRequestsMetric(md pmetric.Metrics, id gatewayID) pmetric.NumberDataPointSlice {
	rm := md.ResourceMetrics().AppendEmpty()
	if id.service != "" {
		rm.Resource().Attributes().PutStr("service.name", id.service)
	}
	if id.namespace != "" {
		rm.Resource().Attributes().PutStr("service.namespace", id.namespace)
	}
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(metadata.ScopeName)
	m := sm.Metrics().AppendEmpty()
	m.SetName(metricRequests)
	m.SetUnit(metricRequestsUnit)
	m.SetDescription(metricRequestsDesc)
	sum := m.SetEmptySum()
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	sum.SetIsMonotonic(true)
	return sum.DataPoints()
}
