// Package testutil holds helpers shared by the components' tests: free
// loopback addresses and reading the components' own telemetry.
package testutil // import "github.com/otelgateway/otelgateway/internal/testutil"

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// FreeAddr returns a loopback address with a port that was free a moment ago.
// Tests never use fixed ports, so they can run in parallel with anything.
//
// The port is drawn at random from below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range): a port taken from bind(":0") and
// released is free again for the next listener on port 0 or outgoing
// connection, in this package or in another one testing in parallel, before
// the component under test binds it. Nothing picks ports below that range
// unasked.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	lo, hi := reservedPortRange()
	for range 1000 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(lo+rand.IntN(hi-lo)))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // held by something else: draw again
		}
		if err := ln.Close(); err != nil {
			tb.Fatalf("releasing port %s: %v", addr, err)
		}
		return addr
	}
	tb.Fatalf("no free loopback port found below the ephemeral range")
	return ""
}

// reservedPortRange returns the ports FreeAddr draws from: up to 16,384
// ports just below the ephemeral range's first port, and above 1024.
func reservedPortRange() (lo, hi int) {
	hi = 32768 // Linux's default first ephemeral port
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 2048 {
				hi = v
			}
		}
	}
	return max(1025, hi-16384), hi
}

// Int64Sum returns the value of the int64 counter or up-down counter name at
// the data point whose attributes include every one of attrs; 0 when the
// metric or the point does not exist (yet).
func Int64Sum(tb testing.TB, tel *componenttest.Telemetry, name string, attrs ...attribute.KeyValue) int64 {
	tb.Helper()
	m, err := tel.GetMetric(name)
	if err != nil {
		return 0
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		tb.Fatalf("metric %s is %T, want an int64 sum", name, m.Data)
	}
	var total int64
	for _, dp := range sum.DataPoints {
		if hasAll(dp.Attributes, attrs) {
			total += dp.Value
		}
	}
	return total
}

// Int64Gauge returns the value of an int64 gauge (observable gauges included)
// at the point that carries attrs.
func Int64Gauge(tb testing.TB, tel *componenttest.Telemetry, name string, attrs ...attribute.KeyValue) int64 {
	tb.Helper()
	m, err := tel.GetMetric(name)
	if err != nil {
		return 0
	}
	switch data := m.Data.(type) {
	case metricdata.Gauge[int64]:
		for _, dp := range data.DataPoints {
			if hasAll(dp.Attributes, attrs) {
				return dp.Value
			}
		}
	case metricdata.Sum[int64]:
		for _, dp := range data.DataPoints {
			if hasAll(dp.Attributes, attrs) {
				return dp.Value
			}
		}
	default:
		tb.Fatalf("metric %s is %T, want an int64 gauge", name, m.Data)
	}
	return 0
}

func hasAll(set attribute.Set, attrs []attribute.KeyValue) bool {
	for _, kv := range attrs {
		v, ok := set.Value(kv.Key)
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// LoadConfig unmarshals the YAML file into cfg (failing the test if it
// cannot) and returns what validating it says, so config tests read as a
// table of files and expected messages.
func LoadConfig(tb testing.TB, file string, cfg any) error {
	tb.Helper()
	cm, err := confmaptest.LoadConf(file)
	if err != nil {
		tb.Fatal(err)
	}
	if err := cm.Unmarshal(cfg); err != nil {
		tb.Fatalf("unmarshal %s: %v", file, err)
	}
	return confmap.Validate(cfg)
}

// CheckError fails the test unless err's text is exactly want ("" for nil),
// and reports whether err was nil, so callers can go on checking values.
func CheckError(tb testing.TB, err error, want string) bool {
	tb.Helper()
	switch {
	case want == "" && err != nil:
		tb.Fatalf("unexpected error: %v", err)
	case want != "" && (err == nil || err.Error() != want):
		tb.Fatalf("error = %v, want %q", err, want)
	}
	return err == nil
}

// DecodeConfig unmarshals and validates the YAML file into cfg and returns
// the first error of either step, so config tests can pin the exact message
// of a value rejected while decoding (a TextUnmarshaler) as well as of one
// rejected by Validate.
func DecodeConfig(tb testing.TB, file string, cfg any) error {
	tb.Helper()
	cm, err := confmaptest.LoadConf(file)
	if err != nil {
		tb.Fatal(err)
	}
	if err := cm.Unmarshal(cfg); err != nil {
		return err
	}
	return confmap.Validate(cfg)
}
