package status

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// terms records the terms an Elector begins and ends.
type terms struct {
	mu    sync.Mutex
	begun []context.Context
	ended int
	wake  chan struct{}
}

func (t *terms) BeginTerm(ctx context.Context) {
	t.mu.Lock()
	t.begun = append(t.begun, ctx)
	t.mu.Unlock()
	t.signal()
}

func (t *terms) EndTerm() {
	t.mu.Lock()
	t.ended++
	t.mu.Unlock()
	t.signal()
}

func (t *terms) signal() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

func (t *terms) state() (int, int, context.Context) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var last context.Context
	if len(t.begun) > 0 {
		last = t.begun[len(t.begun)-1]
	}
	return len(t.begun), t.ended, last
}

func waitLeader(t *testing.T, e *Elector, want func(Leader) bool, what string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		l, changed := e.Leader()
		if want(l) {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s (leader %+v)", what, l)
		}
	}
}

// docs/operations.md, "Status write-back and leader election": losing the lease stops writing at once. Another holder takes the Lease while this
// replica leads: the term's context (every status write and Event runs under it) ends within
// the renew deadline, the term is ended, and the replica follows the new holder, whose
// address is where status streams are relayed to.
func TestElectorEndsTheTermWhenTheLeaseIsLost(t *testing.T) {
	cs := leaseClientset()
	tm := &terms{wake: make(chan struct{}, 1)}
	const renewDeadline = 400 * time.Millisecond
	e, err := NewElector(ElectorConfig{Logger: hclog.NewNullLogger(), Client: cs, Namespace: "sluice-system", Name: "sluice-watcher",
		ID: "a", Address: "10.0.0.1:18000", LeaseDuration: time.Second, RenewDeadline: renewDeadline, RetryPeriod: 50 * time.Millisecond, Writer: tm})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	defer func() { cancel(); <-done }()

	waitLeader(t, e, func(l Leader) bool { return l.Self }, "leading")
	begun, _, term := tm.state()
	if begun != 1 || term.Err() != nil {
		t.Fatalf("%d terms begun, current term ended: %v", begun, term.Err())
	}

	// Someone else holds the Lease now, freshly renewed, for a minute.
	leases := cs.CoordinationV1().Leases("sluice-system")
	l, err := leases.Get(ctx, "sluice-watcher", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Spec.HolderIdentity = ptr.To(Identity("b", "10.0.0.2:18000"))
	l.Spec.LeaseDurationSeconds = ptr.To[int32](60)
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	stolen := time.Now()
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-term.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the term's context did not end after the lease was lost")
	}
	took := time.Since(stolen)
	t.Logf("term ended %v after the lease was taken (renew deadline %v)", took.Round(time.Millisecond), renewDeadline)
	for {
		_, ended, _ := tm.state()
		if ended == 1 {
			break
		}
		select {
		case <-tm.wake:
		case <-time.After(10 * time.Second):
			t.Fatal("the term was not ended")
		}
	}
	waitLeader(t, e, func(l Leader) bool { return !l.Self && l.Address == "10.0.0.2:18000" }, "following b")
	if begun, _, _ := tm.state(); begun != 1 {
		t.Fatalf("%d terms begun while b holds the lease", begun)
	}
}

// leaseClientset is a fake clientset whose Leases keep the apiserver's optimistic
// concurrency: every write bumps the resourceVersion and an update naming another one is a
// conflict (client-go's elector relies on that to notice another holder).
func leaseClientset() *fake.Clientset {
	cs := fake.NewClientset()
	gvr := coordinationv1.SchemeGroupVersion.WithResource("leases")
	var mu sync.Mutex
	next := 0
	bump := func(l *coordinationv1.Lease) {
		next++
		l.ResourceVersion = strconv.Itoa(next)
	}
	cs.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		bump(a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease))
		return false, nil, nil
	})
	cs.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		cur, err := cs.Tracker().Get(gvr, l.Namespace, l.Name)
		if err != nil {
			return true, nil, err
		}
		if rv := cur.(*coordinationv1.Lease).ResourceVersion; rv != l.ResourceVersion {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), l.Name, fmt.Errorf("at %s, not %s", rv, l.ResourceVersion))
		}
		bump(l)
		return true, l, cs.Tracker().Update(gvr, l, l.Namespace)
	})
	return cs
}

func TestNewElectorRejectsMissingDependencies(t *testing.T) {
	if _, err := NewElector(ElectorConfig{Logger: hclog.NewNullLogger(), Client: fake.NewClientset(), Namespace: "ns", Name: "l", ID: "a"}); err == nil {
		t.Fatal("NewElector accepted a Config without Writer and Address")
	}
}
