package testutil

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/storage/filestorage"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/extension/xextension/storage"

	"github.com/otelgateway/otelgateway/extension/filestorageextension"
)

// FileStorage starts the distribution's file_storage extension on dir
// (bbolt files, as the collector writes them), shut down at the test's end.
func FileStorage(t testing.TB, dir string) storage.Extension {
	t.Helper()
	f := filestorageextension.NewFactory()
	cfg := f.CreateDefaultConfig().(*filestorage.Config)
	cfg.Directory = dir
	e, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	return e.(storage.Extension)
}

// TruncateStorageFiles truncates every file in dir to size bytes and
// returns their paths.
func TruncateStorageFiles(t testing.TB, dir string, size int64) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	if len(paths) == 0 {
		t.Fatalf("no storage file in %s", dir)
	}
	return paths
}

// MovedAside returns the files moved aside from path (path.corrupt-*).
func MovedAside(t testing.TB, path string) []string {
	t.Helper()
	m, err := filepath.Glob(path + ".corrupt-*")
	if err != nil {
		t.Fatal(err)
	}
	return m
}
