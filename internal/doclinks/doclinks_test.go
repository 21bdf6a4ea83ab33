// Package doclinks holds the repository's Markdown to its own links: every
// relative link of every *.md file must name a file or directory that exists,
// and a link to a heading (#anchor) must name a heading that file has, as
// GitHub renders it. Documentation moves between files; this test is what
// notices a link left pointing at the old place.
package doclinks

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository root, two levels above this package.
const root = "../.."

// skipDirs are not documentation of this repository: build output, caches,
// and git's own files.
var skipDirs = map[string]bool{".git": true, "dist": true, "node_modules": true, ".cache": true}

var (
	inlineLink = regexp.MustCompile(`\]\(([^()\s]+)\)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

func TestRelativeLinksResolve(t *testing.T) {
	files := markdownFiles(t)
	if len(files) < 10 {
		t.Fatalf("found %d Markdown files under %s; the walk is broken", len(files), root)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := headingAnchors(t, path)
		anchors[path] = a
		return a
	}
	checked := 0
	for _, file := range files {
		for _, l := range links(t, file) {
			target, frag, _ := strings.Cut(l.target, "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path := file
			if target != "" {
				path = filepath.Join(filepath.Dir(file), filepath.FromSlash(target))
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", rel(file), l.line, l.target, rel(path))
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if !anchorsOf(path)[frag] {
				t.Errorf("%s:%d: link %q: %s has no heading #%s", rel(file), l.line, l.target, rel(path), frag)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d relative links; the link scan is broken", checked)
	}
}

// TestAnchorSlugs pins the heading-to-anchor rule to GitHub's.
func TestAnchorSlugs(t *testing.T) {
	for h, want := range map[string]string{
		"Naming profiles (`profile`)":                   "naming-profiles-profile",
		"Drop-in for contrib's prometheus exporter":     "drop-in-for-contribs-prometheus-exporter",
		"Sampled spans and which input to choose":       "sampled-spans-and-which-input-to-choose",
		"Conflicts: one documented outcome each, never": "conflicts-one-documented-outcome-each-never",
		"Prometheus 3": "prometheus-3",
		"bench/receiver: gateway receiver vs ptraceotlp": "benchreceiver-gateway-receiver-vs-ptraceotlp",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}

type link struct {
	target string
	line   int
}

func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (skipDirs[d.Name()] || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// links returns the inline links of a file outside fenced code blocks and
// code spans.
func links(t *testing.T, file string) []link {
	t.Helper()
	var out []link
	eachLine(t, file, func(n int, line string, inFence bool) {
		if inFence {
			return
		}
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			out = append(out, link{target: m[1], line: n})
		}
	})
	return out
}

// headingAnchors returns the anchors GitHub gives a file's headings: the
// slug, and slug-1, slug-2, … for repeats.
func headingAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	seen := map[string]int{}
	anchors := map[string]bool{}
	eachLine(t, file, func(_ int, line string, inFence bool) {
		if inFence {
			return
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			anchors[s+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[s] = true
		}
		seen[s]++
	})
	return anchors
}

func eachLine(t *testing.T, file string, f func(n int, line string, inFence bool)) {
	t.Helper()
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	inFence := false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if trimmed := strings.TrimSpace(line); strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			inFence = !inFence
			continue
		}
		f(n, line, inFence)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// slug is GitHub's heading anchor: lower case, letters, digits, spaces,
// hyphens and underscores kept (spaces become hyphens), the rest dropped.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func rel(path string) string {
	if r, err := filepath.Rel(root, path); err == nil {
		return filepath.ToSlash(r)
	}
	return path
}
