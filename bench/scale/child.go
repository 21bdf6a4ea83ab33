package scale

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Child is a collector child process seen from the parent.
type Child struct {
	Ready
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan error

	stop    sync.Once
	stopErr error
}

// StartChild re-executes this test binary as a collector (TestMain runs
// RunChild when EnvChild is set), with extra environment (GOMAXPROCS=…).
func StartChild(cfg ChildConfig, env ...string) (*Child, error) {
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), EnvChild+"="+string(js)), env...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &Child{cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if line, ok := strings.CutPrefix(lines.Text(), ReadyPrefix); ok {
			go func() {
				_, _ = io.Copy(io.Discard, stdout)
				c.done <- cmd.Wait()
			}()
			if err := json.Unmarshal([]byte(line), &c.Ready); err != nil {
				return nil, errors.Join(err, c.Stop())
			}
			return c, nil
		}
	}
	_ = stdin.Close()
	return nil, fmt.Errorf("collector child exited before it was ready: %v", cmd.Wait())
}

// Stop closes the child's stdin (it shuts its collector down and exits)
// and waits for it.
func (c *Child) Stop() error {
	c.stop.Do(func() {
		_ = c.stdin.Close()
		select {
		case c.stopErr = <-c.done:
		case <-time.After(5 * time.Minute):
			_ = c.cmd.Process.Kill()
			c.stopErr = errors.New("collector child did not stop within 5 minutes: killed")
		}
	})
	return c.stopErr
}

// Exited says how the child ended when it has ("" while it runs): a
// failed post names the cause (killed by the OOM killer, a panic).
func (c *Child) Exited() string {
	select {
	case err := <-c.done:
		c.done <- err // for Stop
		if err == nil {
			return "the collector child exited"
		}
		return "the collector child ended: " + err.Error()
	default:
		return ""
	}
}

// Stats asks the child's control server.
func (c *Child) Stats() (Stats, error) {
	var s Stats
	resp, err := http.Get("http://" + c.Control + "/stats")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// Profile saves the child's pprof profile name (heap, mutex, block) to path.
func (c *Child) Profile(name, path string) error {
	resp, err := http.Get("http://" + c.Control + "/debug/pprof/" + name)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	return errors.Join(err, f.Close())
}

// Mem is the child's resident memory now and at its peak (VmRSS, VmHWM).
func (c *Child) Mem() (rss, peak int64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(c.cmd.Process.Pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = v << 10
		case "VmHWM:":
			peak = v << 10
		}
	}
	return rss, peak, nil
}

// CPU is the child's user+system time so far (/proc/PID/stat, in clock
// ticks of 10 ms: the phases measured last seconds).
func (c *Child) CPU() (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(c.cmd.Process.Pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// utime and stime are fields 14 and 15, f[11] and f[12] here.
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// WaitFlush waits until a flush that began after time after (Unix ns) has
// gone through the whole pipeline, and returns it.
func (c *Child) WaitFlush(ctx context.Context, after int64) (Flush, error) {
	for {
		s, err := c.Stats()
		if err != nil {
			return Flush{}, err
		}
		var sum int64
		for _, f := range s.Flushes {
			sum += f.Points
		}
		if n := len(s.Flushes); n > 0 && s.Flushes[n-1].Start >= after && s.Flushed == sum {
			return s.Flushes[n-1], nil
		}
		select {
		case <-ctx.Done():
			return Flush{}, fmt.Errorf("waiting for a flush after %v: %w", time.Unix(0, after), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
