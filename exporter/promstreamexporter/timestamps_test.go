package promstreamexporter

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// pointTime is the timestamp of every point of timedMetrics: 1700000100.123456789 s,
// which Prometheus keeps as 1700000100123 ms.
const (
	pointTime   = pcommon.Timestamp(1_700_000_100_123_456_789)
	pointTimeMs = int64(1_700_000_100_123)
)

// timedMetrics is kindsMetrics with a timestamp on every point, and one
// gauge point without one.
func timedMetrics() pmetric.Metrics {
	md := kindsMetrics()
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := 0; i < ms.Len(); i++ {
		m := ms.At(i)
		switch m.Type() {
		case pmetric.MetricTypeGauge:
			m.Gauge().DataPoints().At(0).SetTimestamp(pointTime)
		case pmetric.MetricTypeSum:
			m.Sum().DataPoints().At(0).SetTimestamp(pointTime)
		case pmetric.MetricTypeHistogram:
			m.Histogram().DataPoints().At(0).SetTimestamp(pointTime)
		case pmetric.MetricTypeExponentialHistogram:
			m.ExponentialHistogram().DataPoints().At(0).SetTimestamp(pointTime)
		case pmetric.MetricTypeSummary:
			m.Summary().DataPoints().At(0).SetTimestamp(pointTime)
		}
	}
	g := ms.AppendEmpty()
	g.SetName("untimed")
	g.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(3)
	return md
}

// sampleTimes parses body with Prometheus's parser and returns each
// sample's timestamp (-1: none) by series and value.
func sampleTimes(t *testing.T, body []byte, contentType string) map[string]int64 {
	t.Helper()
	p, err := textparse.New(body, contentType, labels.NewSymbolTable(), textparse.ParserOptions{OpenMetricsSkipSTSeries: true, KeepClassicOnClassicAndNativeHistograms: true})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("Prometheus's parser rejects the exposition: %v\n%s", err, body)
		}
		var l labels.Labels
		var ts *int64
		switch entry {
		case textparse.EntrySeries:
			p.Labels(&l)
			_, ts, _ = p.Series()
		case textparse.EntryHistogram:
			p.Labels(&l)
			_, ts, _, _ = p.Histogram()
		default:
			continue
		}
		key := l.String()
		if entry == textparse.EntryHistogram {
			key += " native"
		}
		if ts == nil {
			out[key] = -1
		} else {
			out[key] = *ts
		}
	}
}

// TestSendTimestamps: with send_timestamps every sample carries its point's
// timestamp, in milliseconds in the text formats and protobuf (timestamp_ms)
// and in seconds in OpenMetrics (golden files); _created lines and points
// without a timestamp carry none; Prometheus's parsers read the same
// millisecond everywhere.
func TestSendTimestamps(t *testing.T) {
	cases := []struct {
		golden, accept string
	}{
		{"timestamps.prom", acceptText004},
		{"timestamps.om.txt", acceptOpenMetrics},
		{"", acceptProto},
	}
	var first map[string]int64
	for _, c := range cases {
		cfg := createDefaultConfig()
		cfg.SendTimestamps = true
		e, _ := exporterWith(t, cfg)
		if err := e.consumeMetrics(context.Background(), timedMetrics()); err != nil {
			t.Fatal(err)
		}
		rec := get(t, e, metricsPath, http.Header{"Accept": {c.accept}})
		if c.golden != "" {
			checkGolden(t, c.golden, rec.Body.Bytes())
		}
		times := sampleTimes(t, rec.Body.Bytes(), rec.Header().Get("Content-Type"))
		timed := 0
		for series, ts := range times {
			switch {
			case strings.Contains(series, "untimed") || strings.Contains(series, "target_info"):
				if ts != -1 {
					t.Errorf("%s: %s has timestamp %d, want none", c.accept, series, ts)
				}
			case ts != pointTimeMs:
				t.Errorf("%s: %s has timestamp %d, want %d", c.accept, series, ts, pointTimeMs)
			default:
				timed++
			}
		}
		if timed < 18 { // every sample of kindsMetrics
			t.Errorf("%s: only %d timed samples:\n%v", c.accept, timed, times)
		}
		if first == nil {
			first = times
			continue
		}
		for series, ts := range first {
			if got, ok := times[series]; ok && got != ts {
				t.Errorf("%s: %s at %d, text at %d", c.accept, series, got, ts)
			}
		}
	}
}

// TestNoTimestampsByDefault: without send_timestamps no sample has one.
func TestNoTimestampsByDefault(t *testing.T) {
	e, _ := exporterWith(t, createDefaultConfig())
	if err := e.consumeMetrics(context.Background(), timedMetrics()); err != nil {
		t.Fatal(err)
	}
	for _, accept := range []string{acceptText004, acceptOpenMetrics, acceptProto} {
		rec := get(t, e, metricsPath, http.Header{"Accept": {accept}})
		for series, ts := range sampleTimes(t, rec.Body.Bytes(), rec.Header().Get("Content-Type")) {
			if ts != -1 {
				t.Errorf("%s: %s has timestamp %d", accept, series, ts)
			}
		}
	}
}

// TestScrapeWithTimestampsAllocatesAlmostNothing: send_timestamps renders
// each timestamp into the scrape's own buffer, nothing per series.
func TestScrapeWithTimestampsAllocatesAlmostNothing(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.SendTimestamps = true
	e, _ := exporterWith(t, cfg)
	_ = e.consumeMetrics(context.Background(), timedMetrics())
	for _, accept := range []string{acceptText004, acceptOpenMetrics, acceptProto} {
		req, _ := http.NewRequest(http.MethodGet, metricsPath, nil)
		req.Header.Set("Accept", accept)
		rw := &discardRW{h: http.Header{}}
		e.handleMetrics(rw, req)
		n := testing.AllocsPerRun(50, func() { e.handleMetrics(rw, req) })
		if n > 8 {
			t.Fatalf("%s: a scrape allocated %.0f times, want a handful", accept, n)
		}
	}
}
