package health

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// What the health poller costs the gateway (issue 25, item 4), measured
// with the poller's defaults and with the settings that were its defaults
// before it paced its requests (max_concurrency 16, page_size 1000, every
// request as soon as a slot is free):
//
//  1. against the fake Kong (10k upstreams × 2 targets, a child process):
//     the requests of one poll, how long they took to arrive, the rate
//     they arrived at, and the most in flight at once at the admin API;
//  2. against a gateway (nginx with the lua module: one worker serving a
//     proxy location and a Kong-shaped Admin API that builds and
//     cjson-encodes each answer, testdata/nginx): the gateway's CPU per
//     poll, and the proxy's latency under a steady open-loop load with no
//     poller, then while each configuration polls.
//
//     go test -run TestGatewayCost -v -count 1 -timeout 20m .
//
// HEALTHBENCH_PROXY_RATE sets the proxy load (requests/s, default 1000),
// HEALTHBENCH_LOAD_FOR its length in seconds per configuration (default
// 30: one poll at the default interval). The nginx part needs nginx-light,
// libnginx-mod-http-lua and lua-cjson (Debian); the test fails without
// them, naming what is missing. On a machine shared with other work, run
// the test binary under SCHED_FIFO so that others' work does not make the
// proxy's tail (the figures in the README were taken so):
//
//	go test -c -o hb.test . && chrt -f 10 ./hb.test -test.run TestGatewayCost -test.v

// costConfigs are the configurations compared: the poller's settings
// before it paced its requests (all of a poll's requests as fast as 16 at
// a time allow, pages of 1,000, every 10s), its defaults, and its defaults
// polling every 10s.
var costConfigs = []struct {
	name string
	o    Options
}{
	{"before: 16 at once, page_size 1000, every 10s", Options{MaxConcurrency: 16, PageSize: 1000, PollInterval: 10 * time.Second, RequestRate: unpaced}},
	{"defaults (every 30s, page_size 100, paced)", Options{}},
	{"defaults, every 10s", Options{PollInterval: 10 * time.Second}},
}

// kongInterval is the Kong poller's default interval.
const kongInterval = 30 * time.Second

func (o Options) interval() time.Duration {
	if o.PollInterval > 0 {
		return o.PollInterval
	}
	return kongInterval
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func TestGatewayCost(t *testing.T) {
	closePipeline(t)
	var out strings.Builder
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)

	// 1. What the poller sends.
	f := fakeKong(t)
	fmt.Fprintf(&out, "\n== what one poll sends: fake Kong, %d upstreams × %d targets ==\n", Upstreams, TargetsPer)
	fmt.Fprintln(tw, "configuration\trequests\tpoll (receiver)\tfirst → last request\trate while polling\tmean rate\tpeak in flight")
	for _, c := range costConfigs {
		if _, err := f.Stats(true); err != nil {
			t.Fatal(err)
		}
		o := c.o
		o.KongURL, o.ReportInterval = f.URL, time.Hour
		p, err := StartPipeline(o)
		if err != nil {
			t.Fatal(err)
		}
		s, err := p.WaitPolls(1, 2*time.Minute)
		st, serr := f.Stats(true)
		if cerr := p.Close(); err == nil {
			err = cerr
		}
		if err != nil || serr != nil {
			t.Fatal(err, serr)
		}
		window := st.Last.Sub(st.First)
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.0f/s\t%.0f/s\t%d\n", c.name, st.Requests, ms(s.Duration), ms(window),
			float64(st.Requests)/window.Seconds(), float64(st.Requests)/max(c.o.interval(), s.Duration).Seconds(), st.PeakInFlight)
		if st.Requests < Upstreams {
			t.Errorf("%s: %d requests in a poll of %d upstreams", c.name, st.Requests, Upstreams)
		}
	}
	_ = tw.Flush()

	// 2. What the gateway pays.
	if m := NginxMissing(); m != "" {
		t.Fatalf("the gateway part needs %s", m)
	}
	rate := envInt("HEALTHBENCH_PROXY_RATE", 1000)
	loadFor := time.Duration(envInt("HEALTHBENCH_LOAD_FOR", 30)) * time.Second
	ng, err := StartNginx(t.TempDir(), 1, Upstreams, TargetsPer)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ng.Close() }()
	Load(ng.ProxyURL, rate, 2*time.Second) // warm up connections
	fmt.Fprintf(&out, "\n== what the gateway pays: nginx, 1 worker serving the proxy and a Kong-shaped Admin API (lua, cjson per answer); proxy load %d requests/s for %v ==\n", rate, loadFor)
	fmt.Fprintln(tw, "configuration\tgateway CPU per poll\tpoll (receiver)\tpolls during load\tproxy p50\tp99\tp99.9\tmax\tproxy requests")
	row := func(name, cpu, poll string, polls int64, r LoadResult) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d (%d failed)\n", name, cpu, poll, polls,
			ms(r.Quantile(0.5)), ms(r.Quantile(0.99)), ms(r.Quantile(0.999)), ms(r.Quantile(1)), r.Sent, r.Failed)
		if r.Failed > 0 {
			t.Errorf("%s: %d of %d proxy requests failed: %v", name, r.Failed, r.Sent, r.Err)
		}
	}
	c0, _ := ng.CPU()
	idle := Load(ng.ProxyURL, rate, loadFor)
	c1, _ := ng.CPU()
	row("no poller", "-", "-", 0, idle)
	t.Logf("gateway CPU for the proxy load alone: %s over %v", ms(c1-c0), loadFor)
	for _, c := range costConfigs {
		o := c.o
		o.KongURL, o.ReportInterval = ng.AdminURL, time.Hour
		c0, _ := ng.CPU()
		p, err := StartPipeline(o)
		if err != nil {
			t.Fatal(err)
		}
		s1, err := p.WaitPolls(1, 2*time.Minute)
		c1, _ := ng.CPU()
		if err != nil {
			_ = p.Close()
			t.Fatal(err)
		}
		// The proxy under load while the poller keeps polling.
		res := Load(ng.ProxyURL, rate, loadFor)
		s2, err := p.Polls()
		if cerr := p.Close(); err == nil {
			err = cerr
		}
		if err != nil || s2.Failed > 0 {
			t.Fatalf("%s: %v, %d failed polls", c.name, err, s2.Failed)
		}
		row(c.name, ms(c1-c0), ms(s1.Duration), s2.Polls-s1.Polls, res)
	}
	_ = tw.Flush()
	t.Log(out.String())
}
