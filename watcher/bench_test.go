package main_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

var benchObjects struct {
	once sync.Once
	ns   string
	n    int
}

// populate creates n Ingresses, Services and EndpointSlices in one namespace, once.
func populate(b *testing.B, c *testenv.Cluster, n int) string {
	b.Helper()
	benchObjects.once.Do(func() {
		ns := c.Namespace(b)
		ctx := context.Background()
		cfg := c.AdminConfig()
		cfg.QPS, cfg.Burst = 5000, 5000
		cs := kubernetes.NewForConfigOrDie(cfg)
		start := time.Now()
		var wg sync.WaitGroup
		work := make(chan int)
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					name := fmt.Sprintf("app%d", i)
					if _, err := cs.CoreV1().Services(ns).Create(ctx, service(name), metav1.CreateOptions{}); err != nil {
						b.Error(err)
					}
					ing := ingress(name)
					if _, err := cs.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
						b.Error(err)
					}
					// Hand-made: the benchmark needs an exact number of slices, one per Service,
					// and no workload's churn in what it measures.
					eps := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
						AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080))}},
						Endpoints: []discoveryv1.Endpoint{{Addresses: []string{fmt.Sprintf("10.%d.%d.1", i/250, i%250)}}}}
					if _, err := cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, eps, metav1.CreateOptions{}); err != nil {
						b.Error(err)
					}
				}
			}()
		}
		for i := 0; i < n; i++ {
			work <- i
		}
		close(work)
		wg.Wait()
		b.Logf("created %d objects in %s", 3*n, time.Since(start).Round(time.Millisecond))
		benchObjects.ns, benchObjects.n = ns, n
	})
	return benchObjects.ns
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// BenchmarkTimeToMarker: from starting the watcher process to the marker reaching a client,
// with 10k Ingresses, 10k Services and 10k EndpointSlices, against a bare client-go informer
// listing the same objects in the same run. Reported: medians over the iterations, their
// ratio, the watcher's CPU time until the marker, and its RSS per 1k objects after the
// marker (and at its peak).
func BenchmarkTimeToMarker(b *testing.B) {
	c := testenv.SharedCluster(b)
	const n = 10000
	ns := populate(b, c, n)
	cs := kubernetes.NewForConfigOrDie(c.AdminConfig())
	kindsFlag := "networking.k8s.io/v1/ingresses,v1/services,discovery.k8s.io/v1/endpointslices"
	// Build the binaries before timing anything: the first StartBinary would build them.
	if _, err := testenv.Binaries(); err != nil {
		b.Fatal(err)
	}
	var sluice, bare, rss, peak, cpu []float64
	for b.Loop() {
		// Bare informer: the physical limit of listing the same objects.
		start := time.Now()
		f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
		syncs := []cache.InformerSynced{f.Networking().V1().Ingresses().Informer().HasSynced, f.Core().V1().Services().Informer().HasSynced,
			f.Discovery().V1().EndpointSlices().Informer().HasSynced}
		stop := make(chan struct{})
		f.Start(stop)
		cache.WaitForCacheSync(stop, syncs...)
		bare = append(bare, time.Since(start).Seconds())
		close(stop)
		f.Shutdown()

		a := testenv.Addrs(b, 2)
		start = time.Now()
		p := testenv.StartBinary(b, "watcher", "--kubeconfig", c.AdminKubeconfig, "--listen", a[0], "--http-listen", a[1],
			"--namespaces", ns, "--kinds", kindsFlag, "--kube-qps", "1000", "--kube-burst", "2000")
		fl := followB(b, a[0])
		<-fl
		sluice = append(sluice, time.Since(start).Seconds())
		cpu = append(cpu, p.CPU().Seconds())
		rss = append(rss, p.RSS("VmRSS"))
		peak = append(peak, p.RSS("VmHWM"))
		p.Kill()
	}
	b.ReportMetric(median(sluice)*1000, "sluice-ms")
	b.ReportMetric(median(bare)*1000, "informer-ms")
	b.ReportMetric(median(sluice)/median(bare), "ratio")
	b.ReportMetric(median(cpu)*1000, "watcher-cpu-ms")
	b.ReportMetric(median(rss)/1024/float64(3*n/1000), "rss-MiB/1k-objects")
	b.ReportMetric(median(peak)/1024, "peak-rss-MiB")
}

// followB opens a stream and returns a channel closed when its marker arrived.
func followB(b *testing.B, addr string) <-chan struct{} {
	b.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := grpcx.Dial(addr, grpcx.ClientConfig{})
		if err != nil {
			b.Error(err)
			return
		}
		defer conn.Close()
		// A stream that ends before its marker (the watcher is starting: UNAVAILABLE) is
		// opened again.
		err = testenv.Poll(testenv.PollInterval, 5*time.Minute, func() (bool, error) {
			stream, err := watchv1.NewWatchServiceClient(conn).Watch(context.Background(), &watchv1.WatchRequest{}, waitForReady)
			for err == nil {
				var m *watchv1.WatchResponse
				if m, err = stream.Recv(); err == nil && m.GetInitialSyncComplete() != nil {
					return true, nil
				}
			}
			return false, err
		})
		if err != nil {
			b.Errorf("no marker: %v", err) // b.Errorf, not Fatal: this is not the benchmark's goroutine
		}
	}()
	return done
}
