package gateway

// What decoding an OTLP metrics export (the gateways' pushed metrics,
// MetricsOf) into pdata holds: as for spans (OTLPProtoCost, OTLPJSONCost),
// an empty data point is 2 bytes on the wire and over 100 in pdata, so a
// 20 MiB body of empty points would hold about 1 GB. The same walks cost
// metrics exports with these tables.

// metricsElementBytes is what pdata (v1.71.0) keeps per element, measured
// on this machine as elementBytes (heap after a collection, 100k empty
// elements unmarshalled from protobuf): resourceMetrics 137.6,
// scopeMetrics 121.6, metrics 105.6 (plus its gauge, sum or histogram
// message), number and summary points 105.6, histogram points 169.6,
// exponential histogram points 201.6, exemplars 84.0, quantiles 25.6;
// rounded up.
var metricsElementBytes = [...]int64{
	arrayResourceMetrics: 144,
	arrayScopeMetrics:    128,
	arrayMetrics:         144,
	arrayNumberPoints:    112,
	arrayHistPoints:      176,
	arrayExpPoints:       208,
	arraySummaryPoints:   112,
	arrayExemplars:       88,
	arrayQuantiles:       32,
	arrayPoints:          0, // set in elementBytes (the dearest point)
}

// metricsProtoFields are the metrics messages' fields that hold elements or
// lead to them (opentelemetry-proto v1: metrics_service.proto,
// metrics.proto; 1000 is the deprecated instrumentation_library_metrics
// pdata still reads as scope_metrics).
var metricsProtoFields = map[protoMsg][]protoField{
	costMetricsRequest:  {{1, arrayResourceMetrics, costResourceMetrics}},
	costResourceMetrics: {{1, arrayOther, costResource}, {2, arrayScopeMetrics, costScopeMetrics}, {1000, arrayScopeMetrics, costScopeMetrics}},
	costScopeMetrics:    {{1, arrayOther, costScope}, {2, arrayMetrics, costMetric}},
	// gauge 5, sum 7, histogram 9, exponential_histogram 10, summary 11,
	// metadata 12.
	costMetric: {{5, arrayOther, costNumberData}, {7, arrayOther, costNumberData}, {9, arrayOther, costHistData},
		{10, arrayOther, costExpData}, {11, arrayOther, costSummaryData}, {12, arrayAttributes, costKeyValue}},
	costNumberData:   {{1, arrayNumberPoints, costNumberPoint}},
	costHistData:     {{1, arrayHistPoints, costHistPoint}},
	costExpData:      {{1, arrayExpPoints, costExpPoint}},
	costSummaryData:  {{1, arraySummaryPoints, costSummaryPoint}},
	costNumberPoint:  {{7, arrayAttributes, costKeyValue}, {5, arrayExemplars, costExemplar}},
	costHistPoint:    {{9, arrayAttributes, costKeyValue}, {8, arrayExemplars, costExemplar}},
	costExpPoint:     {{1, arrayAttributes, costKeyValue}, {11, arrayExemplars, costExemplar}},
	costSummaryPoint: {{7, arrayAttributes, costKeyValue}, {6, arrayQuantiles, costNone}},
	costExemplar:     {{7, arrayAttributes, costKeyValue}},
}

// metricsJSONArrays are the metrics arrays by the JSON keys pdata's decoder
// matches (both spellings where it accepts both).
var metricsJSONArrays = map[string]otlpArray{
	"resourceMetrics": arrayResourceMetrics, "resource_metrics": arrayResourceMetrics,
	"scopeMetrics": arrayScopeMetrics, "scope_metrics": arrayScopeMetrics,
	"metrics":    arrayMetrics,
	"dataPoints": arrayPoints, "data_points": arrayPoints,
	"exemplars":      arrayExemplars,
	"quantileValues": arrayQuantiles, "quantile_values": arrayQuantiles,
	"filteredAttributes": arrayAttributes, "filtered_attributes": arrayAttributes,
	"metadata": arrayAttributes,
}

// count counts one element of array a among the spans or data points.
func (c *DecodeCost) count(a otlpArray) {
	switch a {
	case arraySpans:
		c.Spans++
	case arrayNumberPoints, arrayHistPoints, arrayExpPoints, arraySummaryPoints, arrayPoints:
		c.Points++
	}
}

// OTLPMetricsProtoCost estimates what unmarshalling
// ExportMetricsServiceRequest b into pdata holds, as OTLPProtoCost does for
// traces.
func OTLPMetricsProtoCost(b []byte) DecodeCost {
	var c DecodeCost
	protoCost(b, costMetricsRequest, 0, &c)
	c.Bytes += 2 * int64(len(b))
	return c
}
