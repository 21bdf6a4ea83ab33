package traffic_test

import (
	"fmt"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/traffic"
)

// One Kong request counted under the kong profile, and the window that
// holds it rendered as pdata: every family with a value for the request has
// a point, labelled as Kong's Prometheus plugin labels it.
func ExampleAggregator() {
	a := traffic.New(traffic.Settings{Profile: traffic.ProfileKong, Limits: traffic.Limits{MaxTuples: 10_000}})
	var e gateway.Event
	e.Reset()
	e.Kind, e.RouteName, e.ServiceName, e.StatusCode, e.Source = gateway.KindKong, "orders", "shop", 200, gateway.SourceUpstream
	e.TotalMS, e.UpstreamMS = 12, 9
	a.Add([]gateway.Event{e})

	w := a.Take()
	md := w.Metrics(0, w.Len(), 1_700_000_000_000_000_000, 1_700_000_005_000_000_000)
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := 0; i < ms.Len(); i++ {
		m := ms.At(i)
		switch m.Name() {
		case "kong_http_requests_total":
			dp := m.Sum().DataPoints().At(0)
			fmt.Println(m.Name(), dp.IntValue(), dp.Attributes().AsRaw())
		case "kong_upstream_latency_ms":
			dp := m.Histogram().DataPoints().At(0)
			fmt.Println(m.Name(), dp.Count(), dp.Sum(), dp.Attributes().AsRaw())
		}
	}
	// Output:
	// kong_http_requests_total 1 map[code:200 consumer: route:orders service:shop source:service workspace:default]
	// kong_upstream_latency_ms 1 9 map[route:orders service:shop workspace:default]
}
