package e2e

// Process and network helpers for the black-box end-to-end tests.
//
// Everything here talks to the system under test only through its binary,
// its config file and its network endpoints: this module must never import
// the main otelgateway module, so that it tests what users actually run.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// readyTimeout bounds how long a freshly started process may take to
	// serve its readiness endpoint. Generous because the suite runs with
	// -race on a 2-core machine.
	readyTimeout = 60 * time.Second
	// convergeTimeout bounds how long we wait for counts to show up.
	convergeTimeout = 60 * time.Second
	// pollInterval is the pause between two polls of an endpoint.
	pollInterval = 200 * time.Millisecond
	// termGrace is how long a process gets to exit after SIGTERM before
	// the whole process group is SIGKILLed.
	termGrace = 5 * time.Second
	// logTailLines is how much of a process log is printed on failure.
	logTailLines = 80
)

// otelcolBin is the absolute path of the collector distribution under test,
// taken from OTELCOL_BIN in TestMain.
var otelcolBin string

// httpClient is shared by all tests; the timeout keeps a hung endpoint from
// eating the whole test deadline.
var httpClient = &http.Client{Timeout: 10 * time.Second}

// TestMain refuses to run without a collector binary. Skipping would let a
// broken build look green, so a missing binary is a hard failure.
func TestMain(m *testing.M) {
	bin := os.Getenv("OTELCOL_BIN")
	if err := checkBinary(bin); err != nil {
		fmt.Fprintf(os.Stderr,
			"OTELCOL_BIN not set: run `make test` which builds the distribution with ocb (%v)\n", err)
		os.Exit(1)
	}
	otelcolBin = bin
	os.Exit(m.Run())
}

// checkBinary verifies that path names an existing, executable regular file.
func checkBinary(path string) error {
	if path == "" {
		return errors.New("OTELCOL_BIN is empty")
	}
	if !filepath.IsAbs(path) {
		return fmt.Errorf("OTELCOL_BIN=%q is not an absolute path", path)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("OTELCOL_BIN=%q: %w", path, err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("OTELCOL_BIN=%q is not an executable file", path)
	}
	return nil
}

// freePorts returns n distinct free TCP ports on 127.0.0.1, for children
// that must be told their ports before they start (and keep them across
// restarts).
//
// The ports come from below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range): a port reserved and released is
// otherwise free for anything that binds port 0 (an httptest server, another
// child) or dials out (Prometheus scraping, a retrying exporter) before the
// child binds it, and the child then dies with "address already in use". No
// port is handed out twice in one run of the suite, so a test's lingering
// child cannot collide with the next test's either. Each port is checked
// free by binding it.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	if portNext == 0 {
		lo, hi := reservedPortRange()
		portLo, portHi = lo, hi
		portNext = lo + rand.IntN(hi-lo)
	}
	ports := make([]int, 0, n)
	for tried := 0; len(ports) < n; tried++ {
		if tried == portHi-portLo {
			t.Fatalf("no free loopback port left in [%d, %d)", portLo, portHi)
		}
		p := portNext
		portNext++
		if portNext == portHi {
			portNext = portLo
		}
		if portUsed[p] {
			continue
		}
		l, err := net.Listen("tcp", hostPort(p))
		if err != nil {
			continue // something else holds it
		}
		_ = l.Close()
		portUsed[p] = true
		ports = append(ports, p)
	}
	return ports
}

var (
	portMu                   sync.Mutex
	portLo, portHi, portNext int
	portUsed                 = map[int]bool{}
)

// reservedPortRange returns the ports freePorts draws from: up to 16,384
// ports just below the ephemeral range's first port, and above 1024. The
// main module's internal/testutil has the same rule; this module never
// imports that one (it tests the binary only), hence the copy.
func reservedPortRange() (lo, hi int) {
	hi = 32768 // Linux's default first ephemeral port
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 2048 {
				hi = v
			}
		}
	}
	lo = max(1025, hi-16384)
	return lo, hi
}

// hostPort formats a loopback address for port.
func hostPort(port int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// process is a child process started in its own process group, so that it
// and anything it spawns can be signalled together.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed once cmd.Wait has returned
	waitErr error         // valid after done is closed
}

// startProcess starts bin with args, sending stdout and stderr to logPath.
// A t.Cleanup (registered even if the test later fails or panics) stops the
// process group and, when the test failed, prints the tail of the log.
func startProcess(t *testing.T, name, logPath, bin string, args ...string) *process {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("create log for %s: %v", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile // an *os.File is handed to the child directly, no copy goroutine
	cmd.Stderr = logFile
	// Own process group: we signal -pid so that grandchildren die too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		t.Fatalf("start %s (%s): %v", name, bin, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	// Exactly one goroutine waits, so that both stop() and readiness polling
	// can observe an exit without racing on cmd.Wait.
	go func() {
		p.waitErr = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("---- last %d lines of %s log (%s) ----\n%s", logTailLines, name, logPath, p.logTail(logTailLines))
		}
	})
	t.Logf("started %s pid=%d: %s %s", name, cmd.Process.Pid, bin, strings.Join(args, " "))
	return p
}

// exited reports whether the process has already terminated.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, escalates to SIGKILL after
// termGrace, and always waits for the process to be reaped.
func (p *process) stop(t *testing.T) {
	t.Helper()
	if p.exited() {
		return
	}
	pgid := -p.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(termGrace):
	}
	t.Logf("%s pid=%d did not exit %s after SIGTERM; sending SIGKILL", p.name, p.cmd.Process.Pid, termGrace)
	_ = syscall.Kill(pgid, syscall.SIGKILL)
	<-p.done
}

// logTail returns the last n lines of the process log.
func (p *process) logTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitHTTP200 polls url until it answers 200 OK. It fails fast, with the log
// tail, if the process dies while we wait.
func waitHTTP200(t *testing.T, p *process, url string) {
	t.Helper()
	waitReady(t, p, url, func() error {
		status, _, err := httpGet(url)
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("status %d", status)
		}
		return err
	})
}

// waitReady polls probe until it returns nil, failing fast, with the log
// tail, if the process dies while we wait. what names the endpoint.
func waitReady(t *testing.T, p *process, what string, probe func() error) {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	lastErr := errors.New("no attempt yet")
	for time.Now().Before(deadline) {
		if p.exited() {
			t.Fatalf("%s exited (%v) before %s became ready; log tail:\n%s",
				p.name, p.waitErr, what, p.logTail(logTailLines))
		}
		if lastErr = probe(); lastErr == nil {
			return
		}
		time.Sleep(pollInterval)
	}
	t.Fatalf("%s: %s not ready after %s (last: %v)", p.name, what, readyTimeout, lastErr)
}

// httpGet fetches url and returns status, body and any transport error.
func httpGet(url string) (int, []byte, error) {
	resp, err := httpClient.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// httpPost sends body with the given Content-Type and returns status and body.
func httpPost(t *testing.T, url, contentType string, body []byte) (int, []byte) {
	t.Helper()
	resp, err := httpClient.Post(url, contentType, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s (%s, %d bytes): %v", url, contentType, len(body), err)
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read response of POST %s: %v", url, err)
	}
	return resp.StatusCode, respBody
}

// eventually calls check until it reports done or timeout passes. check
// returns a human-readable state that is included in the failure message, so
// a timeout explains what was last observed (e.g. a diff).
func eventually(t *testing.T, timeout time.Duration, what string, check func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var state string
	for {
		var ok bool
		ok, state = check()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last state:\n%s", timeout, what, state)
		}
		time.Sleep(pollInterval)
	}
}

// collector is a running otelgateway collector and its endpoints.
type collector struct {
	proc          *process
	httpAddr      string // OTLP/HTTP receiver
	grpcAddr      string // OTLP/gRPC receiver
	promAddr      string // promstream exporter
	telemetryAddr string // internal telemetry (Prometheus pull reader)
	otlpHTTPAddr  string // standard otlp receiver (OTLP/HTTP), only with startCollectorOTLP
	ports         []int  // every port the config was filled with, in order
}

func (c *collector) tracesURL() string    { return "http://" + c.httpAddr + "/v1/traces" }
func (c *collector) metricsURL() string   { return "http://" + c.promAddr + "/metrics" }
func (c *collector) telemetryURL() string { return "http://" + c.telemetryAddr + "/metrics" }

// collectorConfig is the contract config; %[n]d verbs are filled with ports.
const collectorConfig = `receivers:
  gateway:
    protocols:
      http:
        endpoint: 127.0.0.1:%[1]d
        max_request_body_size: 1048576
      grpc:
        endpoint: 127.0.0.1:%[2]d
    flush_interval: 1s
    collector_name: e2e-0
processors:
  cumulative:
    max_stale: 5m
exporters:
  promstream:
    endpoint: 127.0.0.1:%[3]d
    metric_expiration: 5m
    # Gateway series keep exactly their gateway labels (no otel_scope_*).
    without_scope_info: true
    # The tests stop Prometheus first (cleanups run last-started first), so
    # no scrape would end the default 15s grace; TestFleet tests the grace.
    shutdown_grace: 1s
service:
  telemetry:
    logs:
      level: info
    metrics:
      level: detailed
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: %[4]d
  pipelines:
    metrics:
      receivers: [gateway]
      processors: [cumulative]
      exporters: [promstream]
`

// startCollector writes a config with fresh ports, starts the collector and
// waits until the exporter serves /metrics.
func startCollector(t *testing.T) *collector {
	t.Helper()
	return startCollectorWith(t, collectorConfig, 4)
}

// collectorConfigOTLP is collectorConfig plus the distribution's standard
// otlp receiver (OTLP/HTTP on port %[5]d) in the same metrics pipeline, so
// any OTLP metrics source feeds cumulative → promstream.
var collectorConfigOTLP = strings.Replace(strings.Replace(collectorConfig,
	"processors:\n", "  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:%[5]d\nprocessors:\n", 1),
	"receivers: [gateway]", "receivers: [gateway, otlp]", 1)

// startCollectorOTLP is startCollector with the otlp receiver enabled.
func startCollectorOTLP(t *testing.T) *collector {
	t.Helper()
	return startCollectorWith(t, collectorConfigOTLP, 5)
}

func startCollectorWith(t *testing.T, config string, nports int) *collector {
	t.Helper()
	dir := t.TempDir()
	ports := freePorts(t, nports)
	args := make([]any, len(ports))
	for i, p := range ports {
		args[i] = p
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf(config, args...)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatalf("write collector config: %v", err)
	}
	c := &collector{
		httpAddr:      hostPort(ports[0]),
		grpcAddr:      hostPort(ports[1]),
		promAddr:      hostPort(ports[2]),
		telemetryAddr: hostPort(ports[3]),
		ports:         ports,
	}
	if nports > 4 {
		c.otlpHTTPAddr = hostPort(ports[4])
	}
	c.proc = startProcess(t, "otelcol", filepath.Join(dir, "otelcol.log"), otelcolBin, "--config", cfgPath)
	waitHTTP200(t, c.proc, c.metricsURL())
	return c
}

// promServer is a running Prometheus scraping the collector's exporter.
type promServer struct {
	proc *process
	addr string
	dir  string // holds prometheus.yml, the TSDB and the log
}

// prometheusConfig is the head of every Prometheus config: each target is
// scraped every second; scrape_configs follow.
const prometheusConfig = `global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
`

// plainScrapeConfig is the scrape job of startPrometheus. honor_labels keeps
// the job/instance labels the exporter derives from the OTel resource.
const plainScrapeConfig = `  - job_name: otelgateway
    honor_labels: true
    static_configs:
      - targets: ['%s']
`

// startPrometheus starts /usr/bin/prometheus (from PATH) scraping target and
// waits for /-/ready.
func startPrometheus(t *testing.T, target string) *promServer {
	t.Helper()
	return startPrometheusWith(t, fmt.Sprintf(plainScrapeConfig, target))
}

// startPrometheusWith is startPrometheus with the given scrape_configs list
// items (YAML, indented as list items under scrape_configs), for jobs that
// need a scheme, credentials or TLS settings.
func startPrometheusWith(t *testing.T, scrapeConfigs string, flags ...string) *promServer {
	t.Helper()
	return startPrometheusOn(t, hostPort(freePorts(t, 1)[0]), prometheusConfig+scrapeConfigs, flags...)
}

// startPrometheusOn starts Prometheus listening on addr with the whole
// config file config and any extra flags (--web.enable-remote-write-receiver),
// for tests whose collectors must know Prometheus's address before it starts.
// The config file is prometheus.yml in the returned server's dir.
func startPrometheusOn(t *testing.T, addr, config string, flags ...string) *promServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus binary not found in PATH: %v", err)
	}
	return startPrometheusBin(t, bin, addr, config, flags...)
}

// startPrometheusBin is startPrometheusOn with the Prometheus binary bin.
func startPrometheusBin(t *testing.T, bin, addr, config string, flags ...string) *promServer {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatalf("write prometheus config: %v", err)
	}
	args := append([]string{
		"--config.file=" + cfgPath,
		"--storage.tsdb.path=" + filepath.Join(dir, "tsdb"),
		"--web.listen-address=" + addr,
	}, flags...)
	p := startProcess(t, "prometheus", filepath.Join(dir, "prometheus.log"), bin, args...)
	waitHTTP200(t, p, "http://"+addr+"/-/ready")
	return &promServer{proc: p, addr: addr, dir: dir}
}
