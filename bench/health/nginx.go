package health

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// The gateway of TestGatewayCost: Debian's nginx with its lua module
// (apt-get install nginx-light libnginx-mod-http-lua lua-cjson), whose
// workers serve a proxy location and a Kong-shaped Admin API
// (testdata/nginx). Its CPU is read from /proc, master and workers.

// nginxModules are the files the gateway needs beside the nginx binary.
var nginxModules = []string{
	"/usr/lib/nginx/modules/ndk_http_module.so",
	"/usr/lib/nginx/modules/ngx_http_lua_module.so",
	"/usr/lib/x86_64-linux-gnu/lua/5.1/cjson.so",
}

// NginxMissing says what is missing to run the gateway ("" when nothing).
func NginxMissing() string {
	var missing []string
	if _, err := exec.LookPath("nginx"); err != nil {
		missing = append(missing, "nginx")
	}
	for _, m := range nginxModules {
		if _, err := os.Stat(m); err != nil {
			missing = append(missing, m)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return strings.Join(missing, ", ") + " (apt-get install nginx-light libnginx-mod-http-lua lua-cjson)"
}

// Nginx is a running gateway.
type Nginx struct {
	ProxyURL, AdminURL string
	dir                string
	cmd                *exec.Cmd
}

// StartNginx starts the gateway with workers worker processes and a
// Kong-shaped Admin API of upstreams × targetsPer, in a directory of its
// own under dir.
func StartNginx(dir string, workers, upstreams, targetsPer int) (*Nginx, error) {
	if m := NginxMissing(); m != "" {
		return nil, errors.New("missing " + m)
	}
	lua, err := filepath.Abs(filepath.Join("testdata", "nginx"))
	if err != nil {
		return nil, err
	}
	ports := make([]int, 3)
	for i := range ports {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		_, p, _ := net.SplitHostPort(addr)
		ports[i], _ = strconv.Atoi(p)
	}
	tmpl, err := template.ParseFiles(filepath.Join(lua, "nginx.conf"))
	if err != nil {
		return nil, err
	}
	var conf bytes.Buffer
	if err := tmpl.Execute(&conf, map[string]any{
		"ProxyPort": ports[0], "AdminPort": ports[1], "BackendPort": ports[2],
		"Workers": workers, "LuaDir": lua, "Upstreams": upstreams, "TargetsPer": targetsPer,
	}); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, conf.Bytes(), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command("nginx", "-p", dir, "-c", confPath, "-g", "daemon off;")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	n := &Nginx{ProxyURL: "http://127.0.0.1:" + strconv.Itoa(ports[0]), AdminURL: "http://127.0.0.1:" + strconv.Itoa(ports[1]), dir: dir, cmd: cmd}
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range ports[:2] {
		for {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p), time.Second)
			if err == nil {
				_ = c.Close()
				break
			}
			if time.Now().After(deadline) {
				log, _ := os.ReadFile(filepath.Join(dir, "logs", "error.log"))
				return nil, errors.Join(fmt.Errorf("nginx did not listen on %d: %w\n%s", p, err, log), n.Close())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return n, nil
}

// CPU is the user+system CPU time of nginx's master and workers so far.
func (n *Nginx) CPU() (time.Duration, error) {
	master := n.cmd.Process.Pid
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var ticks int64
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: state ppid … utime(14) stime(15).
		rest := string(b[bytes.LastIndexByte(b, ')')+2:])
		f := strings.Fields(rest)
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		if pid != master && ppid != master {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(ticks) * time.Second / clkTck, nil
}

// Close stops nginx (SIGINT: fast shutdown) and waits for it.
func (n *Nginx) Close() error {
	if n == nil || n.cmd == nil {
		return nil
	}
	_ = n.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- n.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = n.cmd.Process.Kill()
		<-done
	}
	n.cmd = nil
	return nil
}
