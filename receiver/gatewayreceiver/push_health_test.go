package gatewayreceiver

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/health"
)

func postHealth(t *testing.T, url, contentType, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, contentType, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestPushedEvents(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) {
		hc := defaultHealthConfig()
		hc.Profile = ProfileKong
		c.Health = configoptional.Some(hc)
	})
	url := "http://" + h.httpAddr + health.DefaultPushPath
	// Timestamps within push.max_clock_skew of now.
	base := time.Now().Add(-2 * time.Minute).UTC()
	at := func(d time.Duration) string { return base.Add(d).Format(time.RFC3339) }
	cases := []struct {
		name, contentType, body string
		wantCode                int
		wantBody                string
	}{
		{"one event", "application/json",
			`{"gateway":"kong-7","kind":"kong","upstream":"billing","target":"api:8080","address":"10.0.0.1:8080","state":"HEALTHY","timestamp":"` + at(0) + `"}`,
			200, `{"accepted":1,"out_of_order":0}`},
		{"array with a bad event", "application/json; charset=utf-8",
			`[{"gateway":"kong-7","kind":"kong","upstream":"billing","target":"api:8080","address":"10.0.0.1:8080","state":"UNHEALTHY","timestamp":"` + at(5*time.Second) + `"},
			  {"gateway":"kong-7","upstream":"billing","target":"x:1","state":"purple"}]`,
			200, `{"accepted":1,"out_of_order":0,"rejected":[{"index":1,"error":"\"state\" \"purple\" is not one of healthy, unhealthy, dns_error, healthchecks_off, mostly_healthy, mostly_unhealthy, degraded, unknown"}]}`},
		{"late event", "application/json",
			`{"gateway":"kong-7","kind":"kong","upstream":"billing","target":"api:8080","address":"10.0.0.1:8080","state":"HEALTHY","timestamp":"` + at(-time.Minute) + `"}`,
			200, `{"accepted":0,"out_of_order":1}`},
		{"dns error", "application/json",
			`[{"gateway":"kong-7","kind":"kong","upstream":"billing","target":"gone.internal:80","state":"DNS_ERROR"}]`,
			200, `{"accepted":1,"out_of_order":0}`},
		{"only bad events", "application/json", `[{"gateway":"kong-7"}]`,
			400, `{"accepted":0,"out_of_order":0,"rejected":[{"index":0,"error":"\"upstream\" is missing"}]}`},
		{"not JSON", "application/json", `<xml/>`,
			400, `{"accepted":0,"out_of_order":0,"error":"health events (want an object or an array of objects): invalid character '\u003c' looking for beginning of value (body starts \"\u003cxml/\u003e\")"}`},
		{"wrong content type", "text/plain", `{}`,
			415, `{"accepted":0,"out_of_order":0,"error":"unsupported Content-Type \"text/plain\", use application/json"}`},
	}
	for _, c := range cases {
		code, body := postHealth(t, url, c.contentType, c.body)
		if code != c.wantCode || body != c.wantBody {
			t.Errorf("%s: %d %s\nwant %d %s", c.name, code, body, c.wantCode, c.wantBody)
		}
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want 405", resp.StatusCode)
	}

	want := map[string]int64{}
	kongSeries(want, "kong-7", "billing", "api:8080", "10.0.0.1:8080", "unhealthy")
	kongSeries(want, "kong-7", "billing", "gone.internal:80", "", "dns_error")
	waitFor(t, func() bool {
		return len(seriesState(sink.AllMetrics())) == len(want) && seriesState(sink.AllMetrics())[`kong_upstream_target_health{address="",state="dns_error",subsystem="http",target="gone.internal:80",upstream="billing"}@kong-7`] == 1
	})
	checkSeries(t, seriesState(sink.AllMetrics()), want)
	for outcome, n := range map[string]int64{"accepted": 3, "rejected": 5, "out_of_order": 1} {
		if got := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_health_events", attribute.String("outcome", outcome)); got != n {
			t.Errorf("events{outcome=%s} = %d, want %d", outcome, got, n)
		}
	}
}

// Traffic keeps flowing through the same server while events are pushed.
func TestPushDoesNotDisturbTraces(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) { c.Health = configoptional.Some(defaultHealthConfig()) })
	if code, _ := postHealth(t, "http://"+h.httpAddr+health.DefaultPushPath, "application/json", `{"gateway":"g","upstream":"u","target":"t:1","state":"healthy"}`); code != 200 {
		t.Fatalf("push: %d", code)
	}
	if code, body := post(t, h.httpAddr, pbContentType, protoBody(t, kongExport("GET", "/a", 200))); code != http.StatusOK {
		t.Fatalf("traces: %d %s", code, body)
	}
}

// A push may carry no more events than push.max_targets, but at least
// 10,000: a body of more is refused whole (413, one rejected event) before
// any is decoded (20 MiB of {} are 7 million events, which took gigabytes
// to decode and answer).
func TestPushOfTooManyEventsIsRefused(t *testing.T) {
	h := start(t, new(consumertest.MetricsSink), func(c *Config) {
		c.Limits.MaxPushedTargets = 3
		c.Health = configoptional.Some(defaultHealthConfig())
	})
	url := "http://" + h.httpAddr + health.DefaultPushPath
	event := `{"gateway":"g","upstream":"u","target":"t:80","state":"healthy"}`
	code, body := postHealth(t, url, "application/json", "["+strings.Repeat(event+",", 10_000)+event+"]")
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "carries at most 10000 events") || !strings.Contains(body, "carries 10001") {
		t.Fatalf("10,001 events: %d %.300s", code, body)
	}
	// 10,000 about one target: applied in order (one accepted, the rest
	// unchanged or out of order).
	if code, body := postHealth(t, url, "application/json", "["+strings.Repeat(event+",", 9_999)+event+"]"); code != http.StatusOK {
		t.Fatalf("10,000 events: %d %.300s", code, body)
	}
	for outcome, n := range map[string]int64{"accepted": 10_000, "rejected": 1} {
		if got := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_health_events", attribute.String("outcome", outcome)); got != n {
			t.Errorf("events{outcome=%s} = %d, want %d", outcome, got, n)
		}
	}
}

// Time is bounded (issue 24, item 4): an event whose timestamp is further
// than push.max_clock_skew from the collector's clock is refused
// (clock_skew), and no event, however it is dated, holds back a correct
// event after it. Before, an event of year 2200 was accepted and every
// later event about its target was out_of_order until the row expired.
func TestPushTimestampsAreBounded(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) {
		hc := defaultHealthConfig()
		hc.Profile = ProfileKong
		c.Health = configoptional.Some(hc)
	})
	url := "http://" + h.httpAddr + health.DefaultPushPath
	event := func(state, ts string) string {
		return `{"gateway":"kong-7","kind":"kong","upstream":"billing","target":"api:8080","address":"10.0.0.1:8080","state":"` + state + `","timestamp":"` + ts + `"}`
	}
	want := map[string]int64{}
	skewed := 0
	for i, c := range []struct {
		name, ts string
		refused  string // "behind" or "ahead of" the collector's clock; "": accepted
	}{
		{"year 1 (Go's zero time)", "0001-01-01T00:00:00Z", "behind"},
		{"year 1677 (before int64 nanoseconds)", "1677-09-21T00:12:43.145224191Z", "behind"},
		{"year 2200", "2200-01-01T00:00:00Z", "ahead of"},
		{"year 2262 (after int64 nanoseconds)", "2262-04-11T23:47:16.854775808Z", "ahead of"},
		{"year 9999", "9999-12-31T23:59:59.999999999Z", "ahead of"},
		{"6 minutes behind", time.Now().Add(-6 * time.Minute).UTC().Format(time.RFC3339Nano), "behind"},
		{"4 minutes ahead, within the window", time.Now().Add(4 * time.Minute).UTC().Format(time.RFC3339Nano), ""},
	} {
		state := []string{"UNHEALTHY", "DNS_ERROR"}[i%2]
		code, body := postHealth(t, url, "application/json", event(state, c.ts))
		if c.refused != "" {
			skewed++
			wantMsg := `{"accepted":0,"out_of_order":0,"rejected":[{"index":0,"error":"\"timestamp\" \"` + c.ts + `\" is more than 5m0s ` + c.refused + ` the collector's clock (`
			if code != http.StatusBadRequest || !strings.HasPrefix(body, wantMsg) || !strings.HasSuffix(body, `): refused (health.push.max_clock_skew)"}]}`) {
				t.Errorf("%s: %d %s\nwant 400 %s…", c.name, code, body, wantMsg)
			}
		} else if code != http.StatusOK || body != `{"accepted":1,"out_of_order":0}` {
			t.Errorf("%s: %d %s, want accepted", c.name, code, body)
		}
		// A correct event right after, of the other state, always applies.
		now := time.Now().UTC().Format(time.RFC3339Nano)
		if code, body := postHealth(t, url, "application/json", event("HEALTHY", now)); code != http.StatusOK || body != `{"accepted":1,"out_of_order":0}` {
			t.Errorf("after %s, an event stamped now: %d %s, want accepted", c.name, code, body)
		}
		clear(want)
		kongSeries(want, "kong-7", "billing", "api:8080", "10.0.0.1:8080", "healthy")
		waitFor(t, func() bool {
			return seriesState(sink.AllMetrics())[`kong_upstream_target_health{address="10.0.0.1:8080",state="healthy",subsystem="http",target="api:8080",upstream="billing"}@kong-7`] == 1
		})
		checkSeries(t, seriesState(sink.AllMetrics()), want)
	}
	for outcome, n := range map[string]int64{"accepted": 8, "clock_skew": int64(skewed), "out_of_order": 0, "rejected": 0} {
		if got := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_health_events", attribute.String("outcome", outcome)); got != n {
			t.Errorf("events{outcome=%s} = %d, want %d", outcome, got, n)
		}
	}
}

// Events about new targets beyond limits.max_pushed_targets are refused,
// counted, and said in the log (once at the first refusal, with the bound).
func TestPushedTargetsBeyondTheLimitAreLogged(t *testing.T) {
	h := start(t, new(consumertest.MetricsSink), func(c *Config) {
		c.Limits.MaxPushedTargets = 2
		c.Health = configoptional.Some(defaultHealthConfig())
	})
	url := "http://" + h.httpAddr + health.DefaultPushPath
	for i := range 5 {
		event := `{"gateway":"g","upstream":"u","target":"t` + strconv.Itoa(i) + `:80","state":"healthy"}`
		if code, body := postHealth(t, url, "application/json", event); (i < 2) != (code == http.StatusOK) {
			t.Fatalf("event %d: %d %s", i, code, body)
		}
	}
	if got := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_health_events", attribute.String("outcome", "over_limit")); got != 3 {
		t.Errorf("events{outcome=over_limit} = %d, want 3", got)
	}
	logs := h.logs.FilterMessageSnippet("limits.max_pushed_targets reached").All()
	if len(logs) != 1 || logs[0].ContextMap()["limits.max_pushed_targets"] != int64(2) || logs[0].ContextMap()["events_folded"] != int64(1) {
		t.Fatalf("fold log lines %v, want one at the first refusal", logs)
	}
}
