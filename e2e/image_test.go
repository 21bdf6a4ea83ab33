package e2e

// The image of deploy/Dockerfile without a container runtime (none runs here): the final
// stage's filesystem is assembled as its COPY lines say, on top of what its distroless
// static nonroot base provides (/etc/passwd and /etc/group with nonroot 65532, /tmp,
// /home/nonroot; no shell, no libc), and its ENTRYPOINT and CMD are run in it with chroot as
// its USER. So the binary is static, the default config's paths and ports work, and
// nothing needs root.

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// dockerStage is what the test reads of the Dockerfile's final stage.
type dockerStage struct {
	from       string
	copies     [][2]string // source (a build-stage path or a repository path), destination
	user       string
	entrypoint []string
	cmd        []string
	expose     []int
}

// finalStage parses the last stage of a Dockerfile: FROM, COPY, USER, ENTRYPOINT and CMD
// (exec form), EXPOSE.
func finalStage(t *testing.T, path string) dockerStage {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string // of the last stage
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 && strings.EqualFold(f[0], "FROM") {
			lines = nil
		}
		lines = append(lines, sc.Text())
	}
	var st dockerStage
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		rest := strings.TrimSpace(strings.TrimPrefix(line, f[0]))
		switch strings.ToUpper(f[0]) {
		case "FROM":
			st = dockerStage{from: f[1]}
		case "COPY":
			args := f[1:]
			for len(args) > 0 && strings.HasPrefix(args[0], "--") {
				args = args[1:]
			}
			if len(args) != 2 {
				t.Fatalf("COPY with %d paths: %s", len(args), line)
			}
			st.copies = append(st.copies, [2]string{args[0], args[1]})
		case "USER":
			st.user = f[1]
		case "ENTRYPOINT", "CMD":
			var v []string
			if err := json.Unmarshal([]byte(rest), &v); err != nil {
				t.Fatalf("%s is not in exec form: %s", f[0], rest)
			}
			if strings.ToUpper(f[0]) == "CMD" {
				st.cmd = v
			} else {
				st.entrypoint = v
			}
		case "EXPOSE":
			for _, p := range f[1:] {
				n, err := strconv.Atoi(p)
				if err != nil {
					t.Fatalf("EXPOSE %s", p)
				}
				st.expose = append(st.expose, n)
			}
		}
	}
	return st
}

// distrolessNonroot writes what gcr.io/distroless/static:nonroot holds that a process can
// notice: the users and groups, /tmp and the nonroot home.
func distrolessNonroot(t *testing.T, root string) {
	t.Helper()
	files := map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
		"etc/group":  "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n",
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for dir, mode := range map[string]fs.FileMode{"tmp": 0o777 | fs.ModeSticky, "home/nonroot": 0o700} {
		p := filepath.Join(root, dir)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(filepath.Join(root, "home/nonroot"), 65532, 65532); err != nil {
		t.Fatal(err)
	}
}

// TestImageRunsAsNonroot assembles deploy/Dockerfile's final stage and runs it as its USER:
// the binary is static (the base has no libc), every EXPOSEd port is served, /metrics and the
// health check answer, a Kong span sent to the image's OTLP/HTTP port comes out with the
// collector label set from HOSTNAME, and the process runs as uid 65532.
func TestImageRunsAsNonroot(t *testing.T) {
	st := finalStage(t, filepath.Join(deployDir, "Dockerfile"))
	if !strings.Contains(st.from, "distroless/static") || !strings.HasSuffix(st.from, ":nonroot") {
		t.Fatalf("final stage FROM %s: the test assembles distroless/static:nonroot", st.from)
	}
	uid, _, ok := strings.Cut(st.user, ":")
	if !ok || uid == "0" || uid == "root" || uid == "" {
		t.Fatalf("USER %q: want a non-root uid:gid", st.user)
	}
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	distrolessNonroot(t, root)
	var size int64
	for _, c := range st.copies {
		src := filepath.Join("..", c[0])
		if strings.HasPrefix(c[0], "/src/dist/") { // the build stage's ocb output
			src = otelcolBin
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatalf("COPY %s: %v", c[0], err)
		}
		dst := filepath.Join(root, c[1])
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := fs.FileMode(0o644)
		if c[1] == st.entrypoint[0] {
			mode = 0o755
		}
		if err := os.WriteFile(dst, b, mode); err != nil {
			t.Fatal(err)
		}
		size += int64(len(b))
	}
	// A container runtime mounts /proc and /sys: the memory_limiter of the default config
	// reads the cgroup's memory limit there.
	for _, fsys := range []string{"/proc", "/sys"} {
		mnt := filepath.Join(root, fsys)
		if err := os.MkdirAll(mnt, 0o555); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("mount", "--bind", fsys, mnt).CombinedOutput(); err != nil {
			t.Fatalf("mount --bind %s (as a container runtime would): %v %s", fsys, err, out)
		}
		t.Cleanup(func() { _ = exec.Command("umount", "--lazy", mnt).Run() })
	}
	bin := filepath.Join(root, st.entrypoint[0])
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("ENTRYPOINT %s: %v", st.entrypoint[0], err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s needs a dynamic loader: the distroless static base has none", st.entrypoint[0])
		}
	}
	_ = f.Close()
	t.Logf("image layers added to the base: %.1f MiB (%d files); USER %s", float64(size)/(1<<20), len(st.copies), st.user)

	args := append([]string{"--userspec=" + st.user, root}, append(st.entrypoint, st.cmd...)...)
	cmd := exec.Command("chroot", args...)
	cmd.Env = []string{"HOSTNAME=img-1"}
	logPath := filepath.Join(t.TempDir(), "image.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{name: "image", logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop(t) })

	waitHTTP200(t, p, "http://127.0.0.1:9464/metrics")
	waitHTTP200(t, p, "http://127.0.0.1:13133/")
	for _, port := range st.expose {
		c, err := net.DialTimeout("tcp", hostPort(port), 2*time.Second)
		if err != nil {
			t.Errorf("EXPOSE %d: nothing listens: %v", port, err)
			continue
		}
		_ = c.Close()
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "Uid:") && strings.Fields(l)[1] != uid {
			t.Errorf("the collector runs as %q, want uid %s", l, uid)
		}
	}

	body, _ := kongExport("img-node", 0, 3)
	if code, resp := httpPost(t, "http://127.0.0.1:14318/v1/traces", "application/x-protobuf", body); code != 200 {
		t.Fatalf("POST to the image's OTLP/HTTP port: %d %s", code, resp)
	}
	eventually(t, convergeTimeout, "the image to serve the requests with collector=img-1", func() (bool, string) {
		_, b, err := httpGet("http://127.0.0.1:9464/metrics")
		if err != nil {
			return false, err.Error()
		}
		return bytes.Contains(b, []byte(`collector="img-1"`)) && bytes.Contains(b, []byte("gateway_requests_total{")), truncate(b)
	})
}
