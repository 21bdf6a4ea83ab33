package distribution

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Contender is one distribution: a built binary, its config, and how its
// /metrics names the requests.
type Contender struct {
	Key    string
	Binary string // path of the ocb-built binary
	Config string // testdata/<key>.yaml
	// Requests and Count name the request counter and the request-duration
	// histogram's _count series; Match, when set, is a label every request
	// series carries (contrib's spans of all names share the families).
	Requests, Count, Match string
}

// Contenders, in the order they run.
var Contenders = []Contender{
	{
		Key:      "ours",
		Binary:   "../../dist/otelcol-gateway",
		Config:   "testdata/ours.yaml",
		Requests: "gateway_requests_total",
		Count:    "http_server_request_duration_seconds_count",
	},
	{
		// The otel profile as it comes: three duration histograms and the
		// bandwidth counters per tuple, exemplars on (~3x contrib's series).
		Key:      "ours-default",
		Binary:   "../../dist/otelcol-gateway",
		Config:   "testdata/ours-default.yaml",
		Requests: "gateway_requests_total",
		Count:    "http_server_request_duration_seconds_count",
	},
	{
		Key:      "contrib",
		Binary:   "dist/otelcol-spanmetrics",
		Config:   "testdata/contrib.yaml",
		Requests: "traces_span_metrics_calls_total",
		Count:    "traces_span_metrics_duration_seconds_count",
		Match:    `span_name="kong"`,
	},
}

// Build makes sure both binaries exist and are up to date: ours through the
// root Makefile (a no-op when dist/otelcol-gateway is newer than every
// source), contrib with ocb when its binary is missing or older than
// builder-config.yaml. A build takes minutes on a busy 2-core machine; both
// are done once and reused.
func Build(goBin string) error {
	mk := exec.Command("make", "-C", "../..", "build", "GO="+goBin)
	if out, err := mk.CombinedOutput(); err != nil {
		return fmt.Errorf("make build: %w\n%s", err, out)
	}
	if fresh("dist/otelcol-spanmetrics", "builder-config.yaml") {
		return nil
	}
	ocb := exec.Command(goBin, "run", "go.opentelemetry.io/collector/cmd/builder@v0.165.0", "--config", "builder-config.yaml")
	if out, err := ocb.CombinedOutput(); err != nil {
		return fmt.Errorf("ocb (contrib): %w\n%s", err, out)
	}
	return nil
}

// fresh reports whether target exists and is newer than source.
func fresh(target, source string) bool {
	t, err := os.Stat(target)
	if err != nil {
		return false
	}
	s, err := os.Stat(source)
	return err == nil && t.ModTime().After(s.ModTime())
}

// Process is a running contender.
type Process struct {
	cmd      *exec.Cmd
	OTLP     string // http://host:port/v1/traces
	Metrics  string // http://host:port/metrics
	stderr   bytes.Buffer
	exited   chan struct{}
	exitErr  error
	PinnedTo string // CPU list given to taskset, "" when not pinned
}

// Start runs the contender with GOMAXPROCS=1 and, when cpu is not empty and
// taskset exists, `taskset -c cpu` (taskset execs the binary: the pid is the
// collector's). Both endpoints are free loopback ports, passed through the
// environment. Start returns once /metrics answers.
func Start(c Contender, cpu string) (*Process, error) {
	otlp, err := freeAddr()
	if err != nil {
		return nil, err
	}
	prom, err := freeAddr()
	if err != nil {
		return nil, err
	}
	bin, err := filepath.Abs(c.Binary)
	if err != nil {
		return nil, err
	}
	args := []string{bin, "--config", c.Config}
	p := &Process{OTLP: "http://" + otlp + "/v1/traces", Metrics: "http://" + prom + "/metrics", exited: make(chan struct{})}
	if ts, err := exec.LookPath("taskset"); cpu != "" && err == nil {
		args = append([]string{ts, "-c", cpu}, args...)
		p.PinnedTo = cpu
	}
	p.cmd = exec.Command(args[0], args[1:]...)
	p.cmd.Env = append(os.Environ(), "GOMAXPROCS=1", "OTLP_HTTP_ENDPOINT="+otlp, "METRICS_ENDPOINT="+prom)
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.exitErr = p.cmd.Wait(); close(p.exited) }()
	for deadline := time.Now().Add(30 * time.Second); ; {
		select {
		case <-p.exited:
			return nil, fmt.Errorf("%s exited at start: %v\n%s", c.Key, p.exitErr, p.stderr.String())
		default:
		}
		if resp, err := http.Get(p.Metrics); err == nil {
			resp.Body.Close()
			if conn, err := net.Dial("tcp", otlp); err == nil {
				conn.Close()
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, errors.Join(fmt.Errorf("%s did not start within 30s", c.Key), p.Stop())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Pid is the collector's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stop sends SIGTERM, waits up to 20 s, then kills the process.
func (p *Process) Stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("killed after 20s without exiting on SIGTERM")
	}
}

// Alive reports whether the process still runs.
func (p *Process) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Stderr is what the process logged (warnings and errors only).
func (p *Process) Stderr() string { return p.stderr.String() }

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's utime and stime: 100
// on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// CPU is the process's user+system time so far (/proc/<pid>/stat fields 14
// and 15).
func CPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: count fields after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')' in %q", pid, s)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// Memory reads VmRSS and VmHWM (peak RSS) from /proc/<pid>/status, in bytes.
func Memory(pid int) (rss, hwm int64, err error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status %s: %w", pid, k, err)
		}
		if k == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}
	return rss, hwm, sc.Err()
}

// RunqueueWait is the time the process's threads were ready to run but
// waited for a CPU (second field of /proc/<pid>/task/<tid>/schedstat, summed
// over the threads): on a shared machine, the share of the step the
// collector lost to other jobs on its core.
func RunqueueWait(pid int) (time.Duration, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var wait int64
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s/%s/schedstat: %w", dir, t.Name(), err)
		}
		wait += n
	}
	return time.Duration(wait), nil
}
