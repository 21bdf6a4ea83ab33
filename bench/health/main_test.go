package health

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// fake is the fake Kong child process every test and benchmark polls.
var fake *FakeKong

// current is the pipeline a benchmark reuses across its b.N rounds;
// switching options shuts the previous one down first.
var (
	current     *Pipeline
	currentOpts Options
)

func pipeline(tb testing.TB, o Options) *Pipeline {
	tb.Helper()
	o.KongURL = fakeKong(tb).URL
	if current != nil && currentOpts == o {
		return current
	}
	closePipeline(tb)
	p, err := StartPipeline(o)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := p.WaitPolls(1, time.Minute); err != nil {
		_ = p.Close()
		tb.Fatal(err)
	}
	current, currentOpts = p, o
	return p
}

func closePipeline(tb testing.TB) {
	if current == nil {
		return
	}
	if err := current.Close(); err != nil && tb != nil {
		tb.Error(err)
	}
	current = nil
	CloseIdle()
}

func fakeKong(tb testing.TB) *FakeKong {
	tb.Helper()
	if fake == nil {
		f, err := StartFakeKong(Upstreams, TargetsPer)
		if err != nil {
			tb.Fatal(err)
		}
		fake = f
	}
	return fake
}

// TestMain is also the fake Kong child's main (envFakeKong set). Otherwise
// it runs the tests, stops the pipeline and the child, and checks that every
// goroutine has stopped.
func TestMain(m *testing.M) {
	if spec := os.Getenv(envFakeKong); spec != "" {
		runFakeKongChild(spec)
		return
	}
	code := m.Run()
	closePipeline(nil)
	if err := fake.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "fake kong:", err)
		code = 1
	}
	CloseIdle()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
