package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var shared struct {
	sync.Mutex
	cluster *Cluster
	err     error
}

// RunMain runs the package's tests and then stops everything testenv started: the shared
// cluster, network namespaces, and any process a test left running. Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }
func RunMain(m *testing.M) int {
	code := m.Run()
	Cleanup()
	return code
}

// Cleanup stops everything testenv started. RunMain calls it.
func Cleanup() {
	killAll()
	shared.Lock()
	if shared.cluster != nil {
		shared.cluster.Stop()
		shared.cluster = nil
	}
	shared.Unlock()
	cleanupMu.Lock()
	fs := cleanups
	cleanups = nil
	cleanupMu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// SharedCluster returns the test package's cluster, starting it on first use. A failure to
// start fails the test with the reason.
func SharedCluster(t testing.TB) *Cluster {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if shared.cluster == nil && shared.err == nil {
		start := time.Now()
		shared.cluster, shared.err = StartCluster(context.Background())
		if shared.err == nil {
			t.Logf("testenv: cluster ready at %s in %s", shared.cluster.Host, time.Since(start).Round(time.Millisecond))
		}
	}
	if shared.err != nil {
		t.Fatalf("testenv: cannot start the test cluster: %v", shared.err)
	}
	return shared.cluster
}

var nameRE = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a fresh namespace named after the test and returns its name. Once the
// cluster runs workloads (its controller-manager reclaims namespaces) the namespace is deleted
// when the test ends, and its Pods stopped with it; before that namespaces are kept, as they
// would never finish terminating.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	base := strings.Trim(nameRE.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = strings.Trim(base[:40], "-")
	}
	name := base + "-" + RandSuffix()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("testenv: create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		c.workloadsMu.Lock()
		running := c.workloads != nil
		c.workloadsMu.Unlock()
		if running && os.Getenv("SLUICE_KEEP_TEST_DIRS") == "" {
			_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	return name
}

// RandSuffix returns 6 random lower-case hex characters.
func RandSuffix() string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("testenv: random: %v", err))
	}
	return hex.EncodeToString(b)
}

// TempDir returns a directory removed by Cleanup (unless SLUICE_KEEP_TEST_DIRS is set).
func TempDir(prefix string) (string, error) {
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	registerCleanup(func() {
		if os.Getenv("SLUICE_KEEP_TEST_DIRS") == "" {
			os.RemoveAll(d)
		}
	})
	return d, nil
}
