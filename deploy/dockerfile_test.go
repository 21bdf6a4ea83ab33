package deploy

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/opencontainers/go-digest"
	ocispecs "github.com/opencontainers/image-spec/specs-go/v1"
)

// TestDockerfileLint runs BuildKit's Dockerfile linter, the checks of `docker build --check`
// (UndefinedVar, JSONArgsRecommended, FromAsCasing, SecretsUsedInArgOrEnv, …), on deploy/Dockerfile.
// The image cannot be built here (no registry to pull golang or distroless from), so base images
// are resolved by a stub that answers an empty linux/amd64 config instead of asking a registry.
func TestDockerfileLint(t *testing.T) {
	dt, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	res, err := dockerfile2llb.DockerfileLint(context.Background(), dt, dockerfile2llb.ConvertOpt{
		MetaResolver: stubResolver{},
		SourceMap:    sourceMap(dt),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error != nil {
		t.Fatalf("Dockerfile does not parse: %s", res.Error.Message)
	}
	for _, w := range res.Warnings {
		line := 0
		if w.Location != nil && len(w.Location.Ranges) > 0 {
			line = int(w.Location.Ranges[0].Start.Line)
		}
		t.Errorf("Dockerfile:%d: %s: %s (%s)", line, w.RuleName, w.Detail, w.URL)
	}
}

// A Dockerfile with known problems must produce warnings: the linter really runs.
func TestDockerfileLintFindsProblems(t *testing.T) {
	bad := "FROM golang:1.26 as build\nENV API_TOKEN=x\nENV X=$UNDEFINED\nCMD echo hi\n"
	res, err := dockerfile2llb.DockerfileLint(context.Background(), []byte(bad), dockerfile2llb.ConvertOpt{
		MetaResolver: stubResolver{},
		SourceMap:    sourceMap([]byte(bad)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, w := range res.Warnings {
		rules = append(rules, w.RuleName)
	}
	for _, want := range []string{"FromAsCasing", "SecretsUsedInArgOrEnv", "UndefinedVar", "JSONArgsRecommended"} {
		if !strings.Contains(strings.Join(rules, " "), want) {
			t.Errorf("lint of a bad Dockerfile reported %v, want %s among them", rules, want)
		}
	}
}

type stubResolver struct{}

func (stubResolver) ResolveImageConfig(_ context.Context, ref string, _ sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	img := ocispecs.Image{Platform: ocispecs.Platform{Architecture: "amd64", OS: "linux"}}
	img.Config.Env = []string{"PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	dt, err := json.Marshal(img)
	if err != nil {
		return "", "", nil, err
	}
	return ref, digest.FromBytes(dt), dt, nil
}

// sourceMap is the Dockerfile as BuildKit's frontend hands it to the linter.
func sourceMap(dt []byte) *llb.SourceMap {
	sm := llb.NewSourceMap(nil, "Dockerfile", "Dockerfile", dt)
	sm.Definition = &llb.Definition{}
	return sm
}
