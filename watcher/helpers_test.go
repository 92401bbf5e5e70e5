package main_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// watcherProc is the watcher binary running as a real process.
type watcherProc struct {
	*testenv.Process
	addr, httpAddr string
}

func startWatcher(t *testing.T, kubeconfig string, args ...string) *watcherProc {
	t.Helper()
	a := testenv.Addrs(t, 2)
	p := testenv.StartBinary(t, "watcher", append([]string{"--kubeconfig", kubeconfig, "--listen", a[0], "--http-listen", a[1], "--log-level", "debug"}, args...)...)
	return &watcherProc{Process: p, addr: a[0], httpAddr: a[1]}
}

// follower reads one Watch stream through a Mirror and records what it saw.
type follower struct {
	t           *testing.T
	mu          sync.Mutex
	mirror      *watchstream.Mirror
	msgs        []*watchv1.WatchResponse
	markerAt    int // index in msgs of the marker, -1 before
	markers     int
	snapshotEnd int
	err         error // the stream's end
	done        chan struct{}
	marker      chan struct{}
	cancel      context.CancelFunc
	// objectsAtMarker are the objects held when the marker arrived.
	objectsAtMarker []*watchv1.Object
}

// follow opens a stream (retrying while the watcher is not serving yet) and follows it.
func follow(t *testing.T, addr string, req *watchv1.WatchRequest) *follower {
	t.Helper()
	return followAs(t, addr, grpcx.TLSFiles{}, req)
}

// followAs is follow with a client certificate (mTLS): the identity it names decides what
// the stream carries.
func followAs(t *testing.T, addr string, tls grpcx.TLSFiles, req *watchv1.WatchRequest) *follower {
	t.Helper()
	conn, err := grpcx.Dial(addr, grpcx.ClientConfig{TLS: tls})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{t: t, mirror: watchstream.NewMirror(), markerAt: -1, snapshotEnd: -1, done: make(chan struct{}), marker: make(chan struct{}), cancel: cancel}
	t.Cleanup(cancel)
	var stream watchv1.WatchService_WatchClient
	var first *watchv1.WatchResponse
	// UNAVAILABLE: the watcher is still resolving kinds; ask again.
	testenv.Eventually(t, time.Minute, "a watch stream", func() (bool, error) {
		stream, err = watchv1.NewWatchServiceClient(conn).Watch(ctx, req, grpc.WaitForReady(true))
		if err == nil {
			first, err = stream.Recv()
		}
		if err != nil && status.Code(err) != codes.Unavailable {
			return false, testenv.Permanent(err)
		}
		return err == nil, err
	})
	f.mirror.StartStream()
	go func() {
		defer close(f.done)
		ev := first
		for {
			f.apply(ev)
			if f.err != nil {
				return
			}
			var err error
			ev, err = stream.Recv()
			if err != nil {
				f.mu.Lock()
				f.err = err
				f.mu.Unlock()
				return
			}
		}
	}()
	return f
}

func (f *follower) apply(ev *watchv1.WatchResponse) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgs = append(f.msgs, ev)
	ch, err := f.mirror.ApplyKeeping(ev)
	if err != nil {
		f.err = fmt.Errorf("stream check: %w", err)
		return
	}
	switch ch {
	case watchstream.ChangeSnapshot:
		f.snapshotEnd = len(f.msgs) - 1
	case watchstream.ChangeSynced:
		f.markers++
		if f.markerAt < 0 {
			f.markerAt = len(f.msgs) - 1
			f.objectsAtMarker = f.mirror.Objects()
			close(f.marker)
		}
	}
}

func (f *follower) waitMarker(d time.Duration) {
	f.t.Helper()
	select {
	case <-f.marker:
	case <-f.done:
		f.t.Fatalf("stream ended before the marker: %v", f.streamErr())
	case <-time.After(d):
		f.t.Fatalf("no marker within %s", d)
	}
}

func (f *follower) streamErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *follower) hasMarker() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.markerAt >= 0
}

// waitFor polls cond over the mirror until it holds.
func (f *follower) waitFor(d time.Duration, what string, cond func(m *watchstream.Mirror) bool) {
	f.t.Helper()
	testenv.Eventually(f.t, d, what, func() (bool, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if cond(f.mirror) {
			return true, nil
		}
		if f.err != nil {
			return false, testenv.Permanent(fmt.Errorf("stream ended: %w", f.err))
		}
		return false, nil
	})
}

// watcherRules are the rules the watcher needs for the default kinds, less the verbs named in
// except ("ingresses/list").
func watcherRules(except ...string) []rbacv1.PolicyRule {
	res := []struct{ group, resource string }{
		{"networking.k8s.io", "ingresses"}, {"networking.k8s.io", "ingressclasses"},
		{"", "services"}, {"discovery.k8s.io", "endpointslices"}, {"", "secrets"},
	}
	var rules []rbacv1.PolicyRule
	for _, r := range res {
		var verbs []string
		for _, v := range []string{"get", "list", "watch"} {
			drop := false
			for _, e := range except {
				drop = drop || e == r.resource+"/"+v
			}
			if !drop {
				verbs = append(verbs, v)
			}
		}
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{r.group}, Resources: []string{r.resource}, Verbs: verbs})
	}
	return rules
}

// restrictedKubeconfig mints a user bound to rules and returns its kubeconfig file and name.
func restrictedKubeconfig(t *testing.T, c *testenv.Cluster, rules []rbacv1.PolicyRule) (string, string) {
	t.Helper()
	name := "watcher-" + testenv.RandSuffix()
	cfg, err := c.UserConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Grant(context.Background(), rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}, rules); err != nil {
		t.Fatal(err)
	}
	path, err := c.WriteKubeconfig(cfg, name)
	if err != nil {
		t.Fatal(err)
	}
	return path, name
}

func sigterm(t *testing.T, p *testenv.Process) {
	t.Helper()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

func isUnavailable(err error) bool {
	return status.Code(err) == codes.Unavailable || errors.Is(err, context.Canceled)
}

var _ = strings.Contains

func rbacSubject(user string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}
}

func gvr(group, resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: group, Version: "v1", Resource: resource}
}

func unstructuredOf(m map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: m}
}

var waitForReady = grpc.WaitForReady(true)
