// Package promstream compares Prometheus /metrics exposition paths on the
// "kong10k" workload of issue 3: the promstream exporter, the contrib
// prometheusexporter, client_golang promhttp, VictoriaMetrics/metrics and a
// lower bound that only writes pre-rendered prefixes and values.
//
// Every contender is built from the same Workload and scraped over loopback
// HTTP by the same allocation-free raw HTTP/1.1 client (client.go), so that
// the allocations counted in this process during a scrape are the server's.
package promstream

import (
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Family names as Kong's Prometheus plugin exposes them
// (docs/gateways.md §1c).
const (
	HealthName   = "kong_upstream_target_health"
	RequestsName = "kong_http_requests_total"
	LatencyName  = "kong_request_latency_ms"

	// OTel names that translate to the Kong names under the default
	// UnderscoreEscapingWithSuffixes strategy: a monotonic sum gets
	// `_total`; unit "" adds no unit suffix.
	otelHealthName   = "kong_upstream_target_health"
	otelRequestsName = "kong_http_requests"
	otelLatencyName  = "kong_request_latency_ms"

	healthHelp   = "Health status of targets of upstream."
	requestsHelp = "HTTP status codes per consumer/service/route in Kong."
	latencyHelp  = "Total latency incurred during requesting the specific service, in ms."
)

// LatencyBounds are Kong's UPSTREAM_LATENCY_BUCKETS, which
// kong_request_latency_ms uses (docs/gateways.md §1c): 13 finite bounds,
// plus the implicit +Inf bucket.
var LatencyBounds = []float64{25, 50, 80, 100, 250, 400, 700, 1000, 2000, 5000, 10000, 30000, 60000}

// HealthStates are the four states Kong emits for every target.
var HealthStates = []string{"healthchecks_off", "healthy", "unhealthy", "dns_error"}

// Codes are the status codes counted per route.
var Codes = []string{"200", "404", "500"}

var codeSource = []string{"service", "kong", "service"}

// Labels of each family, sorted by name: every contender is fed (or renders)
// the labels in this order, so the exposed lines are byte-comparable (the
// OTel-based exporters and client_golang sort label names anyway).
var (
	HealthLabels   = []string{"address", "state", "subsystem", "target", "upstream"}
	RequestsLabels = []string{"code", "consumer", "route", "service", "source", "workspace"}
	LatencyLabels  = []string{"route", "service", "workspace"}
)

// Workload is the kong10k set, parametrised so a smaller copy can show that
// allocations per scrape do not depend on the series count.
type Workload struct {
	Upstreams, TargetsPerUpstream, Routes int
}

// Kong10k is the workload of issue 3.
var Kong10k = Workload{Upstreams: 10000, TargetsPerUpstream: 2, Routes: 10000}

// Scaled returns the workload with upstreams and routes divided by div.
func (w Workload) Scaled(div int) Workload {
	return Workload{Upstreams: w.Upstreams / div, TargetsPerUpstream: w.TargetsPerUpstream, Routes: w.Routes / div}
}

// HealthSeries, RequestSeries and LatencySeries count series per family.
func (w Workload) HealthSeries() int  { return w.Upstreams * w.TargetsPerUpstream * len(HealthStates) }
func (w Workload) RequestSeries() int { return w.Routes * len(Codes) }
func (w Workload) LatencySeries() int { return w.Routes }

// SampleLines is the number of sample lines a complete exposition has:
// histograms have one line per bound, +Inf, _sum and _count.
func (w Workload) SampleLines() int {
	return w.HealthSeries() + w.RequestSeries() + w.LatencySeries()*(len(LatencyBounds)+3)
}

func pad5(dst []byte, i int) []byte {
	s := strconv.Itoa(i)
	for n := len(s); n < 5; n++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

// HealthPoint is one health series. Every target has an address and a current state among
// healthy (most), unhealthy, healthchecks_off; dns_error is exposed as 0.
// (Kong exposes address="" for a target in dns_error; empty label values are
// avoided here because the OTel exporters drop empty labels while
// client_golang prints l="", which would make lines differ.)
type HealthPoint struct {
	Upstream, Target, Address, State, Subsystem string
	Value                                       int64
}

// Labels returns the label values in HealthLabels order.
func (s *HealthPoint) Labels() []string {
	return []string{s.Address, s.State, s.Subsystem, s.Target, s.Upstream}
}

// ForEachHealth calls fn for every health series, in a fixed order.
func (w Workload) ForEachHealth(fn func(*HealthPoint)) {
	var b []byte
	for u := 0; u < w.Upstreams; u++ {
		b = append(b[:0], "upstream-"...)
		upstream := string(pad5(b, u))
		for t := 0; t < w.TargetsPerUpstream; t++ {
			target := upstream + "-t" + strconv.Itoa(t) + ".svc.internal:8000"
			n := u*w.TargetsPerUpstream + t
			address := "10." + strconv.Itoa(n>>16&255) + "." + strconv.Itoa(n>>8&255) + "." + strconv.Itoa(n&255) + ":8000"
			current := 1 // healthy
			switch {
			case n%37 == 0:
				current = 0 // healthchecks_off
			case n%10 == 3:
				current = 2 // unhealthy
			}
			for si, state := range HealthStates {
				s := HealthPoint{Upstream: upstream, Target: target, Address: address, State: state, Subsystem: "http"}
				if si == current {
					s.Value = 1
				}
				fn(&s)
			}
		}
	}
}

// RequestPoint is one kong_http_requests_total series.
type RequestPoint struct {
	Service, Route, Code, Source, Workspace, Consumer string
	Value                                             int64
}

// Labels returns the label values in RequestsLabels order.
func (s *RequestPoint) Labels() []string {
	return []string{s.Code, s.Consumer, s.Route, s.Service, s.Source, s.Workspace}
}

func routeNames(r int) (service, route string) {
	var b []byte
	b = append(b, "service-"...)
	service = string(pad5(b, r/2))
	b = append(b[:0], "route-"...)
	route = string(pad5(b, r))
	return service, route
}

// RequestValue is the counter value of route r, code index c, after `bump`
// updates (the ingest benchmark bumps it).
func RequestValue(r, c, bump int) int64 {
	return int64(1+(r*131+c*17)%100000) + int64(bump)
}

// ForEachRequest calls fn for every request counter of routes [from, to).
func (w Workload) ForEachRequest(from, to, bump int, fn func(*RequestPoint)) {
	for r := from; r < to; r++ {
		service, route := routeNames(r)
		consumer := "consumer-" + strconv.Itoa(r%100)
		for c, code := range Codes {
			fn(&RequestPoint{Service: service, Route: route, Code: code, Source: codeSource[c],
				Workspace: "default", Consumer: consumer, Value: RequestValue(r, c, bump)})
		}
	}
}

// LatencyPoint is one kong_request_latency_ms histogram.
type LatencyPoint struct {
	Service, Route, Workspace string
	// Counts are per bucket, not cumulative: len(LatencyBounds)+1 entries,
	// the last one for (60000, +Inf).
	Counts []uint64
	// Observations lists the values that produce Counts and Sum when
	// observed in order (client_golang and VictoriaMetrics need them).
	Observations []float64
	Count        uint64
	Sum          float64
}

// Labels returns the label values in LatencyLabels order.
func (s *LatencyPoint) Labels() []string { return []string{s.Route, s.Service, s.Workspace} }

// observedValue is the value observed for bucket b: 90% of its upper bound,
// 90000 for the +Inf bucket.
func observedValue(b int) float64 {
	if b == len(LatencyBounds) {
		return 90000
	}
	return LatencyBounds[b] * 0.9
}

// ForEachLatency calls fn for every latency histogram of routes [from, to).
// The counts grow with bump. Observations is filled only when obs is set.
func (w Workload) ForEachLatency(from, to, bump int, obs bool, fn func(*LatencyPoint)) {
	for r := from; r < to; r++ {
		service, route := routeNames(r)
		s := LatencyPoint{Service: service, Route: route, Workspace: "default", Counts: make([]uint64, len(LatencyBounds)+1)}
		for b := range s.Counts {
			n := uint64((r+3*b)%7) + uint64(bump)
			s.Counts[b] = n
			v := observedValue(b)
			if bump == 0 {
				// The loaded set: add in observation order, exactly as the
				// SDK-style contenders accumulate, so every _sum matches.
				for k := uint64(0); k < n; k++ {
					if obs {
						s.Observations = append(s.Observations, v)
					}
					s.Sum += v
				}
			} else {
				s.Sum += v * float64(n) // ingest batches: only has to grow
			}
			s.Count += n
		}
		fn(&s)
	}
}

// Metrics builds the workload as one pmetric.Metrics: a gauge (health), a
// cumulative monotonic int sum (requests) and a cumulative explicit-bucket
// histogram (latency). The resource has no service.name or
// service.instance.id, so neither exporter adds job/instance labels or
// target_info.
func (w Workload) Metrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	start := pcommon.NewTimestampFromTime(time.Unix(1_700_000_000, 0))
	now := pcommon.NewTimestampFromTime(time.Now())

	health := ms.AppendEmpty()
	health.SetName(otelHealthName)
	health.SetDescription(healthHelp)
	hdps := health.SetEmptyGauge().DataPoints()
	hdps.EnsureCapacity(w.HealthSeries())
	w.ForEachHealth(func(s *HealthPoint) {
		dp := hdps.AppendEmpty()
		dp.SetTimestamp(now)
		putLabels(dp.Attributes(), HealthLabels, s.Labels())
		dp.SetIntValue(s.Value)
	})

	appendRequests(ms, w, 0, w.Routes, 0, start, now)
	appendLatency(ms, w, 0, w.Routes, 0, start, now)
	return md
}

// RouteBatch builds the ingest batch: requests and latency of routes
// [from, to) with counters advanced by bump (existing series, new values).
func (w Workload) RouteBatch(from, to, bump int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	start := pcommon.NewTimestampFromTime(time.Unix(1_700_000_000, 0))
	now := pcommon.NewTimestampFromTime(time.Now())
	appendRequests(ms, w, from, to, bump, start, now)
	appendLatency(ms, w, from, to, bump, start, now)
	return md
}

// CounterMetrics builds only the request counters (for the memory
// measurement).
func (w Workload) CounterMetrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	start := pcommon.NewTimestampFromTime(time.Unix(1_700_000_000, 0))
	appendRequests(ms, w, 0, w.Routes, 0, start, pcommon.NewTimestampFromTime(time.Now()))
	return md
}

func appendRequests(ms pmetric.MetricSlice, w Workload, from, to, bump int, start, now pcommon.Timestamp) {
	m := ms.AppendEmpty()
	m.SetName(otelRequestsName)
	m.SetDescription(requestsHelp)
	sum := m.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dps := sum.DataPoints()
	dps.EnsureCapacity((to - from) * len(Codes))
	w.ForEachRequest(from, to, bump, func(s *RequestPoint) {
		dp := dps.AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(now)
		putLabels(dp.Attributes(), RequestsLabels, s.Labels())
		dp.SetIntValue(s.Value)
	})
}

func appendLatency(ms pmetric.MetricSlice, w Workload, from, to, bump int, start, now pcommon.Timestamp) {
	m := ms.AppendEmpty()
	m.SetName(otelLatencyName)
	m.SetDescription(latencyHelp)
	h := m.SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dps := h.DataPoints()
	dps.EnsureCapacity(to - from)
	w.ForEachLatency(from, to, bump, false, func(s *LatencyPoint) {
		dp := dps.AppendEmpty()
		dp.SetStartTimestamp(start)
		dp.SetTimestamp(now)
		putLabels(dp.Attributes(), LatencyLabels, s.Labels())
		dp.ExplicitBounds().FromRaw(LatencyBounds)
		dp.BucketCounts().FromRaw(s.Counts)
		dp.SetCount(s.Count)
		dp.SetSum(s.Sum)
	})
}

func putLabels(m pcommon.Map, names, values []string) {
	m.EnsureCapacity(len(names))
	for i, n := range names {
		m.PutStr(n, values[i])
	}
}

// routeBatchEvery builds a batch like RouteBatch's for every nth route.
func (w Workload) routeBatchEvery(nth, bump int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	start := pcommon.NewTimestampFromTime(time.Unix(1_700_000_000, 0))
	now := pcommon.NewTimestampFromTime(time.Now())
	for r := 0; r < w.Routes; r += nth {
		appendRequests(ms, w, r, r+1, bump, start, now)
		appendLatency(ms, w, r, r+1, bump, start, now)
	}
	return md
}
