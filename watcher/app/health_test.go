package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/sluice-io/sluice/internal/ops"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/server"
	"github.com/sluice-io/sluice/watcher/store"
	"github.com/sluice-io/sluice/watcher/store/storetest"
)

// The watcher's /healthz rule: healthy while an epoch serves Watch streams, and while none
// does for at most the bound (starting, or between two epochs); unhealthy, naming why no
// epoch serves, once none did for longer. The Watch service's own state drives it, through
// the ops endpoint the probes ask.
func TestHealthzFailsOnceNoEpochServedForLongerThanTheBound(t *testing.T) {
	watch, err := server.New(server.Config{Logger: hclog.NewNullLogger(), Stopping: make(chan struct{})})
	if err != nil {
		t.Fatal(err)
	}
	var ahead atomic.Int64 // how far the rule's clock is ahead of the wall clock
	now := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	const bound = time.Minute
	o, err := ops.New(ops.Config{Logger: hclog.NewNullLogger(), Registry: ops.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	o.SetHealthCheck(servingHealth(watch.Unserved, bound, now))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- o.Serve(ctx, lis) }()
	defer func() { cancel(); <-served }()
	url := "http://" + lis.Addr().String() + "/healthz"
	healthz := func(after time.Duration) (int, string) {
		t.Helper()
		ahead.Store(int64(after))
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	expect := func(step string, after time.Duration, code int, says string) {
		t.Helper()
		got, body := healthz(after)
		if got != code || !strings.Contains(body, says) {
			t.Fatalf("%s, %s on: /healthz %d %q, want %d saying %q", step, after, got, body, code, says)
		}
	}

	expect("starting", 0, http.StatusOK, "ok")
	expect("starting", 2*bound, http.StatusServiceUnavailable, "kinds not yet resolved")

	st, err := store.New(store.Config{Epoch: "e1", Kinds: []*watchv1.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}}})
	if err != nil {
		t.Fatal(err)
	}
	watch.SetSource(storetest.New(st))
	expect("serving", 0, http.StatusOK, "ok")
	expect("serving", 2*bound, http.StatusOK, "ok")

	watch.Pause("watcher is starting a new epoch")
	expect("between epochs", 0, http.StatusOK, "ok")
	expect("between epochs", bound/2, http.StatusOK, "ok")
	expect("between epochs", 2*bound, http.StatusServiceUnavailable, "starting a new epoch")

	watch.SetSource(storetest.New(st))
	expect("serving again", 2*bound, http.StatusOK, "ok")
}

// The bound covers the two waits an epoch change or a start may take: discovery and the
// initial sync at start, the old streams' last send between epochs.
func TestHealthBoundIsSyncTimeoutPlusSendTimeout(t *testing.T) {
	s := &Settings{SyncTimeout: 2 * time.Minute, SendTimeout: 30 * time.Second}
	if got := s.healthBound(); got != 150*time.Second {
		t.Fatalf("healthBound %s, want 2m30s", got)
	}
}
