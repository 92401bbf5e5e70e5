// Command bench is Sluice's benchmark harness (`make bench`). On a real kube-apiserver and a
// real Caddy it measures, per size, each figure next to its physical limit measured in the
// same run, and writes docs/benchmarks.md and a machine-readable JSON file; CPU profiles of
// the slowest stage go to .bench/ (not in git).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/sluice-io/sluice/internal/contract"
	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/harness/stack"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/internal/pki"
	"github.com/sluice-io/sluice/internal/promtext"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	"github.com/sluice-io/sluice/pusher/caddy"
)

func main() {
	sizes := flag.String("sizes", "1000,10000,100000", "numbers of Ingresses (each with its Service and EndpointSlice)")
	runs := flag.Int("runs", 3, "cold starts per size (the median is reported)")
	changes := flag.Int("changes", 200, "changes per change-to-served measure")
	md := flag.String("out", "docs/benchmarks.md", "the report")
	js := flag.String("json", "docs/benchmarks.json", "the machine-readable results")
	profDir := flag.String("profiles", ".bench", "where CPU profiles go")
	flag.IntVar(&routeConns, "route-conns", 16, "concurrent keep-alive clients of the request-routing measure")
	flag.DurationVar(&routeDuration, "route-duration", 5*time.Second, "how long each request-routing load runs (per Caddy)")
	flag.IntVar(&createWorkers, "create-workers", 64, "concurrent clients creating the objects")
	chartsOnly := flag.Bool("charts-only", false, "measure nothing: redraw the charts next to -out from the results in -json")
	flag.Parse()
	if *chartsOnly {
		if err := redraw(*md, *js); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*sizes, *runs, *changes, *md, *js, *profDir); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		testenv.Cleanup()
		os.Exit(1)
	}
	testenv.Cleanup()
}

// The request-routing load and the object creation, set by flags.
var (
	routeConns    = 16
	routeDuration = 5 * time.Second
	createWorkers = 64
)

// Result is one size's figures (milliseconds, MiB, bytes).
type Result struct {
	Ingresses int `json:"ingresses"`
	Objects   int `json:"objects"`

	ColdStartMs    float64            `json:"cold_start_ms"`
	Stages         map[string]float64 `json:"cold_start_stages_ms"`
	InformerListMs float64            `json:"limit_informer_list_ms"`
	// ListMethod is how InformerListMs was measured (listMethod); a baseline measured
	// another way has no comparable ratio.
	ListMethod    string  `json:"limit_informer_list_method,omitempty"`
	CaddyLoadMs   float64 `json:"limit_caddy_load_ms"`
	ModuleApplyMs float64 `json:"module_apply_complete_ms"`
	// The limit is the informer list plus the module's complete-state apply (what the
	// pusher drives); the ratio is Sluice's cold start over it. Reports written before the
	// limit was defined so have no cold_start_limit_ms and a ratio against the stock /load.
	ColdLimitMs float64 `json:"cold_start_limit_ms"`
	ColdRatio   float64 `json:"cold_start_ratio"`
	// CPU time each process spent from its start to the first request served (the control
	// plane: etcd and kube-apiserver together, over the same span), ms: on a machine of few
	// cores the processes of a cold start compete for them.
	ColdCPUMs map[string]float64 `json:"cold_start_cpu_ms,omitempty"`

	HoldoffMs  float64 `json:"holdoff_ms"`
	IdleP50Ms  float64 `json:"change_idle_p50_ms"`
	IdleP99Ms  float64 `json:"change_idle_p99_ms"`
	ChurnP50Ms float64 `json:"change_churn_p50_ms"`
	ChurnP99Ms float64 `json:"change_churn_p99_ms"`
	// Every change-to-served sample, in the order measured, for the CDF chart.
	IdleSamplesMs  []float64 `json:"change_idle_samples_ms"`
	ChurnSamplesMs []float64 `json:"change_churn_samples_ms"`
	ChurnRate      float64   `json:"churn_updates_per_s"`
	ChangeCaddyMs  float64   `json:"change_limit_caddy_load_ms"`
	// Change to config received on the config stream (a pusher's receipt), and the mean
	// translation time of one published build during the idle measure.
	IdleConfigP50Ms      float64 `json:"change_config_idle_p50_ms"`
	IdleConfigP99Ms      float64 `json:"change_config_idle_p99_ms"`
	ChurnConfigP50Ms     float64 `json:"change_config_churn_p50_ms"`
	ChurnConfigP99Ms     float64 `json:"change_config_churn_p99_ms"`
	TranslateMsPerChange float64 `json:"translate_ms_per_change"`
	ChangesApplied       float64 `json:"changes_caddy_loads"`

	// RSS is per process: steady (VmRSS after the change measures) and peak (VmHWM); of
	// steady, anon (RssAnon) and file (RssFile: the binary's pages); and heap_inuse, the Go
	// heap's spans in use at the same moment (the three Sluice processes only).
	RSS map[string]map[string]float64 `json:"rss_mib"`

	Routing *Routing `json:"routing,omitempty"`

	// Limited is more cold starts, with each process under a container memory limit.
	Limited *Limited `json:"memory_limited,omitempty"`

	WatchBytesPerChange  float64 `json:"watch_bytes_per_change"`
	ConfigBytesPerChange float64 `json:"config_bytes_per_change"`
	ObjectBytes          float64 `json:"changed_object_bytes"`

	Profile string `json:"profile_top,omitempty"`
	// ColdProfile is the top of the translator's CPU profile during the first cold start.
	ColdProfile string            `json:"cold_start_profile_top,omitempty"`
	Heap        map[string]string `json:"heap_top,omitempty"` // process -> pprof -top of its in-use heap
	Date        string            `json:"-"`                  // of a baseline: when it was measured
}

type env struct {
	c       *testenv.Cluster
	bin     string
	backend *testenv.Backend
	cs      kubernetes.Interface
	listCS  kubernetes.Interface // the limit's informer: the watcher's transport
	cert    []byte
	key     []byte
}

func run(sizeList string, runs, changes int, mdPath, jsPath, profDir string) error {
	base := baseline(jsPath)
	ctx := context.Background()
	e := &env{}
	var err error
	stopProgress := prog.run(3 * time.Second)
	defer stopProgress()
	prog.step("starting etcd and kube-apiserver, backends, building binaries", 0)
	fmt.Println("bench: starting etcd and kube-apiserver, backends, building binaries")
	if e.c, err = testenv.StartCluster(ctx); err != nil {
		return err
	}
	defer e.c.Stop()
	if e.bin, err = testenv.Binaries(); err != nil {
		return err
	}
	n, err := testenv.NewNet()
	if err != nil {
		return err
	}
	if e.backend, err = n.StartBackend("bench"); err != nil {
		return err
	}
	cfg := e.c.AdminConfig()
	// The object creation's clients share this rate limit: set high enough that the
	// apiserver, not the client, bounds creation at 100k Ingresses.
	cfg.QPS, cfg.Burst = 20000, 20000
	e.cs = kubernetes.NewForConfigOrDie(cfg)
	listCfg := rest.CopyConfig(cfg)
	listCfg.ContentType = "application/vnd.kubernetes.protobuf"
	listCfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	listCfg.DisableCompression = true
	e.listCS = kubernetes.NewForConfigOrDie(listCfg)
	if e.cert, e.key, err = pki.SelfSigned("bench.example.com", "*.bench.example.com"); err != nil {
		return err
	}
	if _, err := e.cs.NetworkingV1().IngressClasses().Create(ctx, &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "sluice"},
		Spec: networkingv1.IngressClassSpec{Controller: "sluice.io/ingress-controller"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := os.MkdirAll(profDir, 0o755); err != nil {
		return err
	}
	var sizes []int
	for _, s := range strings.Split(sizeList, ",") {
		size, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || size < 1 {
			return fmt.Errorf("-sizes: %q is not a positive number", s)
		}
		sizes = append(sizes, size)
	}
	var results []Result
	var failures []Failure
	for _, size := range sizes {
		r, err := e.measure(ctx, size, runs, changes, profDir)
		if err != nil {
			// A size the apiserver, etcd or the stack cannot hold ends the run (the larger
			// sizes would fail as well), but the sizes measured so far are still reported.
			fmt.Fprintf(os.Stderr, "bench: size %d failed: %v\n", size, err)
			failures = append(failures, Failure{Ingresses: size, Error: firstLines(err.Error(), 12)})
			break
		}
		results = append(results, r)
		print(r)
	}
	if len(results) == 0 {
		return fmt.Errorf("no size completed: %s", failures[0].Error)
	}
	js, _ := json.MarshalIndent(map[string]any{"machine": machine(), "results": results, "failed": failures}, "", "  ")
	if err := os.WriteFile(jsPath, append(js, '\n'), 0o644); err != nil {
		return err
	}
	prog.step("writing the charts", 0)
	if err := writeCharts(filepath.Join(filepath.Dir(mdPath), chartsDir), results); err != nil {
		return err
	}
	if err := os.WriteFile(mdPath, []byte(report(results, base, runs, changes, failures...)), 0o644); err != nil {
		return err
	}
	if len(failures) > 0 {
		return fmt.Errorf("size %d failed (the report has the sizes before it): %s", failures[0].Ingresses, failures[0].Error)
	}
	return nil
}

// Failure is a size that could not be measured, and why.
type Failure struct {
	Ingresses int    `json:"ingresses"`
	Error     string `json:"error"`
}

func firstLines(s string, n int) string {
	ls := strings.SplitN(s, "\n", n+1)
	if len(ls) > n {
		ls = ls[:n]
	}
	return strings.TrimSpace(strings.Join(ls, "\n"))
}

// scaled is base plus per for every 1000 Ingresses: the waits grow with what Sluice must
// list, translate and load, so a large size is not cut off by a limit set for a small one.
func scaled(base, per time.Duration, size int) time.Duration {
	return base + per*time.Duration(size/1000)
}

// baseline reads the results the last run wrote, by size, so that the report shows each
// figure beside the one it replaces (none when there is no readable file).
// redraw rewrites the charts of the report at mdPath from the results in jsPath, so that a
// change to the charts needs no new measure.
func redraw(mdPath, jsPath string) error {
	base := baseline(jsPath)
	if len(base) == 0 {
		return fmt.Errorf("-json %s: no results", jsPath)
	}
	var rs []Result
	for _, r := range base {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Ingresses < rs[j].Ingresses })
	return writeCharts(filepath.Join(filepath.Dir(mdPath), chartsDir), rs)
}

func baseline(path string) map[int]Result {
	out := map[int]Result{}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	var prev struct {
		Machine map[string]string `json:"machine"`
		Results []Result          `json:"results"`
	}
	if json.Unmarshal(b, &prev) != nil {
		return out
	}
	for _, r := range prev.Results {
		r.Date = prev.Machine["date"]
		out[r.Ingresses] = r
	}
	return out
}

func (e *env) populate(ctx context.Context, ns string, size int) error {
	if _, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	start := time.Now()
	prog.step(fmt.Sprintf("%d Ingresses: creating the objects", size), size)
	work := make(chan int)
	errc := make(chan error, 1)
	// The first error stops the creation: an apiserver or etcd that cannot hold the size
	// would fail every remaining create, one round trip each.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	// Many concurrent clients: one create is a round trip to the apiserver and etcd's
	// commit, so 310k objects one worker at a time would take hours.
	for w := 0; w < createWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if ctx.Err() != nil {
					continue
				}
				if err := e.createApp(ctx, ns, i); err != nil {
					select {
					case errc <- fmt.Errorf("creating Ingress %d of %d: %w", i, size, err):
					default:
					}
					cancel()
				}
				prog.add(1)
			}
		}()
	}
	for i := 0; i < size && ctx.Err() == nil; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
	}
	fmt.Printf("bench: created %d Ingresses, Services and EndpointSlices and %d TLS Secrets in %s\n", size, size/10, time.Since(start).Round(time.Millisecond))
	return nil
}

func host(ns string, i int) string { return fmt.Sprintf("app%d.%s.bench.example.com", i, ns) }

func (e *env) createApp(ctx context.Context, ns string, i int) error {
	name := fmt.Sprintf("app%d", i)
	if _, err := e.cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// Hand-made EndpointSlices: the benchmark needs exact control of every slice (their number,
	// and the churn it injects), which a controller's own decisions would blur.
	if _, err := e.cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, e.slice(name, 0), metav1.CreateOptions{}); err != nil {
		return err
	}
	ing := ingress(name, host(ns, i))
	if i%10 == 0 {
		if _, err := e.cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-tls"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.crt": e.cert, "tls.key": e.key}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{host(ns, i)}, SecretName: name + "-tls"}}
	}
	_, err := e.cs.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{})
	return err
}

// listMethod is how the limit's informer list is measured.
const listMethod = "protobuf, uncompressed, polled every 1 ms"

// synced says whether every informer of syncs has synced.
func synced(syncs []cache.InformerSynced) bool {
	for _, s := range syncs {
		if !s() {
			return false
		}
	}
	return true
}

// slice points a Service at the backend, with `extra` not-ready endpoints (for churn).
func (e *env) slice(name string, extra int) *discoveryv1.EndpointSlice {
	eps := []discoveryv1.Endpoint{{Addresses: []string{e.backend.Address}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}
	for j := 0; j < extra; j++ {
		eps = append(eps, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.252.%d.%d", j/250, j%250+1)}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}})
	}
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(e.backend.Port))}}, Endpoints: eps}
}

func ingress(name, h string) *networkingv1.Ingress {
	pt := networkingv1.PathTypePrefix
	cls := "sluice"
	return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IngressSpec{IngressClassName: &cls,
		Rules: []networkingv1.IngressRule{{Host: h, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &pt, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: name, Port: networkingv1.ServiceBackendPort{Name: "http"}}}}}}}}}}}
}

// served reports whether Caddy answers host from the backend.
func served(addr, h string) bool {
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	req.Host = h
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// waitServed waits, at most d, until addr serves host h, and returns how long that took; it
// gives up as soon as one of procs has exited (a process the OOM killer took).
func waitServed(addr, h string, d time.Duration, procs ...*testenv.Process) (time.Duration, error) {
	start := time.Now()
	for !served(addr, h) {
		for _, p := range procs {
			if p.Exited() {
				return 0, fmt.Errorf("%s exited (code %d) before the first request was served", p.Name(), p.ExitCode())
			}
		}
		if time.Since(start) > d {
			return 0, fmt.Errorf("%s not served within %s", h, d)
		}
		time.Sleep(2 * time.Millisecond) // the measure's resolution
	}
	return time.Since(start), nil
}

var logLine = regexp.MustCompile(`^(\S+) \[\w+\]\s+\S+: (.*)$`)

// logAt finds the first line containing msg: its time and its took= value.
// awaitLogs waits until each process has logged its message, at most timeout.
func awaitLogs(want map[*testenv.Process]string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for p, msg := range want {
		for {
			if ts, _ := logAt(p.Logs(), msg); !ts.IsZero() {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s did not log %q within %s", p.Name(), msg, timeout)
			}
			time.Sleep(20 * time.Millisecond) // polling a log file: nothing to wait on
		}
	}
	return nil
}

func logAt(logs, msg string) (time.Time, time.Duration) {
	for _, l := range strings.Split(logs, "\n") {
		if !strings.Contains(l, msg) {
			continue
		}
		m := logLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		ts, _ := time.Parse("2006-01-02T15:04:05.000Z07:00", m[1])
		var took time.Duration
		if i := strings.Index(l, "took="); i >= 0 {
			took, _ = time.ParseDuration(strings.Fields(l[i+5:])[0])
		}
		return ts, took
	}
	return time.Time{}, 0
}

// metric reads a sample of addr's /metrics written as in the text format (`name` or
// `name{label="v"}`), summed over the series that carry those labels. A histogram's
// name_sum and name_count are read from the histogram: Prometheus' parser files them under
// the histogram's name, so promtext.Sum, which knows counters and gauges, finds nothing.
// 0 when /metrics cannot be read or has no such sample.
func metric(addr, sample string) float64 {
	name, labels, err := promtext.ParseSample(sample)
	if err != nil {
		panic(err) // the harness's own literal
	}
	fams, err := promtext.Scrape(addr)
	if err != nil {
		return 0
	}
	for _, suffix := range []string{"_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok || fams[base].GetType() != dto.MetricType_HISTOGRAM {
			continue
		}
		v := 0.0
		for _, m := range fams[base].GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			if suffix == "_sum" {
				v += m.GetHistogram().GetSampleSum()
			} else {
				v += float64(m.GetHistogram().GetSampleCount())
			}
		}
		return v
	}
	return promtext.Sum(fams, name, labels)
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func percentile(xs []float64, p float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(float64(len(s)-1) * p)
	return s[i]
}

func (e *env) measure(ctx context.Context, size, runs, changes int, profDir string) (Result, error) {
	pprofAddr := map[string]string{} // each process's --pprof listener
	ns := fmt.Sprintf("bench-%d", size)
	if err := e.populate(ctx, ns, size); err != nil {
		return Result{}, err
	}
	r := Result{Ingresses: size, Objects: 3*size + size/10, Stages: map[string]float64{}, RSS: map[string]map[string]float64{}}
	stages := map[string][]float64{}
	cpu := map[string][]float64{}
	var cold, informer []float64
	var st *stack.Stack
	defer func() {
		if st != nil {
			st.Stop()
		}
	}()
	last := host(ns, size-1)
	var coldProf <-chan string
	for i := 0; i < runs; i++ {
		prog.step(fmt.Sprintf("%d Ingresses: cold start %d of %d (informer list, then Sluice to first request served)", size, i+1, runs), 0)
		// The limit first: a bare client-go informer listing the same kinds, over the
		// transport the watcher uses (protobuf, uncompressed), so that the limit is the
		// fastest list client-go makes, not a slower default.
		start := time.Now()
		f := informers.NewSharedInformerFactoryWithOptions(e.listCS, 0, informers.WithNamespace(ns))
		syncs := []cache.InformerSynced{f.Networking().V1().Ingresses().Informer().HasSynced, f.Core().V1().Services().Informer().HasSynced,
			f.Discovery().V1().EndpointSlices().Informer().HasSynced, f.Core().V1().Secrets().Informer().HasSynced, f.Networking().V1().IngressClasses().Informer().HasSynced}
		stop := make(chan struct{})
		f.Start(stop)
		// Polled every millisecond: cache.WaitForCacheSync polls every 100 ms, which
		// would add up to 100 ms to the limit (half the list at 1k Ingresses).
		for !synced(syncs) {
			time.Sleep(time.Millisecond)
		}
		informer = append(informer, ms(time.Since(start)))
		close(stop)
		f.Shutdown()

		dir, _ := os.MkdirTemp("", "sluice-bench-")
		start = time.Now()
		cp0 := e.c.ControlPlaneCPU()
		var err error
		// Profiles are served only on a loopback listener of their own (--pprof).
		for _, name := range []string{"watcher", "translator", "pusher"} {
			if pprofAddr[name], err = testenv.FreeAddr(); err != nil {
				return r, err
			}
		}
		st, err = stack.Start(ctx, stack.Config{Cluster: e.c, BinDir: e.bin, Dir: dir, Namespaces: []string{ns},
			WatcherArgs:    []string{"--kube-qps", "1000", "--kube-burst", "2000", "--pprof", pprofAddr["watcher"]},
			TranslatorArgs: []string{"--pprof", pprofAddr["translator"]}, PusherArgs: []string{"--pprof", pprofAddr["pusher"]}})
		if err != nil {
			return r, err
		}
		if i == 0 {
			coldProf = e.profileColdStart(pprofAddr, profDir, size, informer[0])
		}
		if _, err := waitServed(st.HTTPAddr(), last, scaled(5*time.Minute, 6*time.Second, size)); err != nil {
			return r, fmt.Errorf("%w\n%s", err, st.Logs(20))
		}
		cold = append(cold, ms(time.Since(start))) // from starting the processes to the first request served
		cpu["control plane"] = append(cpu["control plane"], ms(e.c.ControlPlaneCPU()-cp0))
		for _, p := range []*testenv.Process{st.Watcher, st.Translator, st.Pusher} {
			cpu[p.Name()] = append(cpu[p.Name()], ms(p.CPU()))
		}
		// The first request can be served before the pusher has logged the apply (it logs
		// after the module answered): every stage's line is awaited, never read as missing.
		if err := awaitLogs(map[*testenv.Process]string{st.Watcher: "barrier open", st.Translator: "watch stream verified complete", st.Pusher: "config applied"}, 30*time.Second); err != nil {
			return r, err
		}
		// Each cold start's logs stay beside the profiles, for reading a stage's time.
		for _, p := range []*testenv.Process{st.Watcher, st.Translator, st.Pusher} {
			_ = os.WriteFile(filepath.Join(profDir, fmt.Sprintf("coldstart-%d-run%d-%s.log", size, i+1, p.Name())), []byte(p.Logs()), 0o644)
		}
		wBarrier, wTook := logAt(st.Watcher.Logs(), "barrier open")
		tVerified, _ := logAt(st.Translator.Logs(), "watch stream verified complete")
		pApplied, pTook := logAt(st.Pusher.Logs(), "config applied")
		translate := metric(st.TranslatorHTTP, `sluice_translator_build_seconds_sum{published="true"}`) * 1000
		stages["1 watcher sync (start to barrier)"] = append(stages["1 watcher sync (start to barrier)"], ms(wTook))
		stages["2 snapshot to translator"] = append(stages["2 snapshot to translator"], ms(tVerified.Sub(wBarrier)))
		stages["3 translation"] = append(stages["3 translation"], translate)
		stages["4 transfer to pusher"] = append(stages["4 transfer to pusher"], ms(pApplied.Sub(tVerified))-ms(pTook)-translate)
		stages["5 Caddy apply"] = append(stages["5 Caddy apply"], ms(pTook))
		if i < runs-1 {
			// The first run's profiles cover three times the informer list, which can
			// outlast the cold start: stopping the processes first would cut them off.
			if coldProf != nil {
				r.ColdProfile, coldProf = <-coldProf, nil
			}
			st.Stop()
			st = nil
		}
	}
	if coldProf != nil {
		r.ColdProfile = <-coldProf
	}
	r.ColdStartMs, r.InformerListMs, r.ListMethod = median(cold), median(informer), listMethod
	for k, v := range stages {
		r.Stages[k] = median(v)
	}
	r.ColdCPUMs = map[string]float64{}
	for k, v := range cpu {
		r.ColdCPUMs[k] = median(v)
	}

	// The other limit: one Caddy /load of the final config, prebuilt.
	final, err := currentConfig(ctx, st.TranslatorAddr)
	if err != nil {
		return r, err
	}
	// Each run loads into a fresh Caddy (loading the same config again is a no-op for Caddy):
	// stock Caddy's POST /load of the rendered config, and the pusher's first apply to a Caddy
	// with the module (its small constant config, then the complete state).
	var loads, puts []float64
	prog.step(fmt.Sprintf("%d Ingresses: Caddy loads of the final config (stock and module)", size), 2*runs)
	for i := 0; i < runs; i++ {
		for _, module := range []bool{false, true} {
			start := testenv.StartStockCaddy
			if module {
				start = testenv.StartCaddy
			}
			cd, err := start(ctx)
			if err != nil {
				return r, err
			}
			cc := caddy.Config{Admin: cd.AdminURL, Render: caddy.RenderOptions{HTTPListen: fmt.Sprintf("127.0.0.1:%d", cd.HTTPPort), HTTPSListen: fmt.Sprintf("127.0.0.1:%d", cd.HTTPSPort)}}
			var took float64
			if module {
				// The pusher's first apply: Caddy's constant config, then the complete state.
				mt, _ := caddy.NewModule(cc)
				t0 := time.Now()
				err = mt.Apply(ctx, final)
				took = ms(time.Since(t0))
				puts = append(puts, took)
			} else {
				target, _ := caddy.New(cc)
				t0 := time.Now()
				err = target.Apply(ctx, final)
				took = ms(time.Since(t0))
				loads = append(loads, took)
			}
			cd.Kill()
			if err != nil {
				return r, err
			}
			prog.add(1)
		}
	}
	r.ModuleApplyMs = median(puts)
	r.CaddyLoadMs = median(loads)
	r.ColdLimitMs = r.InformerListMs + r.ModuleApplyMs
	r.ColdRatio = r.ColdStartMs / r.ColdLimitMs
	r.HoldoffMs = 10

	// Change to served: an Ingress created until the config stream carries it, and until
	// Caddy serves it; idle, then under churn. The bytes are those of one config stream.
	fctx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	f, err := follow(fctx, st.TranslatorAddr)
	if err != nil {
		return r, err
	}
	if _, err := f.waitHost(last, scaled(time.Minute, 3*time.Second, size)); err != nil {
		return r, err
	}
	wBytes0, cBytes0 := metric(st.WatcherHTTP, "sluice_watcher_stream_bytes_total"), f.streamBytes()
	applied0 := metric(st.PusherHTTP, "sluice_pusher_configs_applied_total")
	build0 := metric(st.TranslatorHTTP, `sluice_translator_build_seconds_sum{published="true"}`)
	builds0 := metric(st.TranslatorHTTP, `sluice_translator_build_seconds_count{published="true"}`)
	idleConfig, idle, objBytes, err := e.changes(ctx, st, f, ns, "idle", changes, size)
	if err != nil {
		return r, err
	}
	r.WatchBytesPerChange = (metric(st.WatcherHTTP, "sluice_watcher_stream_bytes_total") - wBytes0) / float64(changes)
	r.ConfigBytesPerChange = (f.streamBytes() - cBytes0) / float64(changes)
	r.ChangesApplied = metric(st.PusherHTTP, "sluice_pusher_configs_applied_total") - applied0
	if n := metric(st.TranslatorHTTP, `sluice_translator_build_seconds_count{published="true"}`) - builds0; n > 0 {
		r.TranslateMsPerChange = (metric(st.TranslatorHTTP, `sluice_translator_build_seconds_sum{published="true"}`) - build0) * 1000 / n
	}
	r.ObjectBytes = objBytes
	r.IdleP50Ms, r.IdleP99Ms = percentile(idle, 0.5), percentile(idle, 0.99)
	r.IdleSamplesMs = idle
	r.IdleConfigP50Ms, r.IdleConfigP99Ms = percentile(idleConfig, 0.5), percentile(idleConfig, 0.99)

	churnCtx, stopChurn := context.WithCancel(ctx)
	churned := make(chan int)
	go func() {
		n := 0
		for churnCtx.Err() == nil {
			svc := fmt.Sprintf("app%d", (n*7919)%size)
			if _, err := e.cs.DiscoveryV1().EndpointSlices(ns).Update(churnCtx, withRV(e, ns, svc, 1+n%3), metav1.UpdateOptions{}); err == nil {
				n++
			}
			select {
			case <-churnCtx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
		churned <- n
	}()
	profile := filepath.Join(profDir, fmt.Sprintf("translator-cpu-%d.pprof", size))
	profDone := make(chan error, 1)
	go func() {
		profDone <- fetch("http://"+pprofAddr["translator"]+"/debug/pprof/profile?seconds=15", profile)
	}()
	churnStart := time.Now()
	churnConfig, churn, _, err := e.changes(ctx, st, f, ns, "churn", changes, size)
	stopChurn()
	n := <-churned
	if err != nil {
		return r, err
	}
	r.ChurnRate = float64(n) / time.Since(churnStart).Seconds()
	r.ChurnP50Ms, r.ChurnP99Ms = percentile(churn, 0.5), percentile(churn, 0.99)
	r.ChurnSamplesMs = churn
	r.ChurnConfigP50Ms, r.ChurnConfigP99Ms = percentile(churnConfig, 0.5), percentile(churnConfig, 0.99)
	if err := <-profDone; err == nil {
		out, _ := exec.Command("go", "tool", "pprof", "-top", "-nodecount=12", profile).Output()
		r.Profile = string(out)
	}
	r.ChangeCaddyMs = median(loads)
	if r.Routing, err = e.routing(ctx, st, ns, size); err != nil {
		return r, err
	}
	// Memory is read before the heap profiles are fetched: building a profile symbolises
	// its stacks, which maps pages of the binary that the process in service never touches,
	// and allocates. The Go heap's HeapInuse comes from the metrics a Prometheus scrape
	// reads, which symbolise nothing.
	prog.step(fmt.Sprintf("%d Ingresses: memory and heap profiles", size), 0)
	for _, p := range []*testenv.Process{st.Watcher, st.Translator, st.Pusher, st.Caddy.Process()} {
		r.RSS[p.Name()] = map[string]float64{"steady": p.RSS("VmRSS") / 1024, "peak": p.RSS("VmHWM") / 1024,
			"anon": p.RSS("RssAnon") / 1024, "file": p.RSS("RssFile") / 1024}
	}
	for name, addr := range map[string]string{"watcher": st.WatcherHTTP, "translator": st.TranslatorHTTP, "pusher": st.PusherHTTP} {
		if v := metric(addr, "go_memstats_heap_inuse_bytes"); v > 0 {
			r.RSS[name]["heap_inuse"] = v / (1 << 20)
		}
	}
	// Where the bytes go: the in-use heap of each process after the change measures.
	r.Heap = map[string]string{}
	for name, addr := range pprofAddr {
		path := filepath.Join(profDir, fmt.Sprintf("%s-heap-%d.pprof", name, size))
		if err := fetch("http://"+addr+"/debug/pprof/heap", path); err == nil {
			out, _ := exec.Command("go", "tool", "pprof", "-top", "-nodecount=8", "-sample_index=inuse_space", path).Output()
			r.Heap[name] = string(out)
		}
	}
	// A cold start under memory limits, once the stack above has stopped.
	st.Stop()
	st = nil
	if r.Limited, err = e.limitedColdStart(ctx, ns, size, runs, r.RSS, r.ColdStartMs); err != nil {
		return r, err
	}
	return r, nil
}

// limitFactor sizes the memory limits of the limited cold starts: this many times each
// process's peak resident size in the unconstrained ones, the size docs/operations.md
// advises ("Memory limits").
const limitFactor = 1.0

// Limited is the cold starts with each Sluice process in a memory cgroup of its own (a
// container's memory limit) of limitFactor times its peak resident size: the process reads
// that limit and sets the Go runtime's soft limit from it, so that the start's garbage is
// collected harder where it would otherwise outgrow the limit.
type Limited struct {
	Factor float64 `json:"factor"`
	// ColdStartMs is the median, from starting the processes to the first request served;
	// 0 when a start did not complete (Error says why).
	ColdStartMs float64 `json:"cold_start_ms"`
	// FreshColdStartMs is the median of the starts from the same fresh binaries without
	// limits, alternating with those.
	FreshColdStartMs float64                   `json:"fresh_cold_start_ms"`
	Processes        map[string]LimitedProcess `json:"processes"`
	Error            string                    `json:"error,omitempty"`
}

// LimitedProcess is what the kernel counted in one process's memory cgroup.
type LimitedProcess struct {
	LimitMiB    float64 `json:"limit_mib"`
	PeakMiB     float64 `json:"peak_mib"`     // the most memory charged to the cgroup at once, of all runs
	MajorFaults uint64  `json:"major_faults"` // the most of one run
	OOMKills    uint64  `json:"oom_kills"`
	Exited      bool    `json:"exited"` // before the end of a run's measure
}

// limitedColdStart starts the stack again 2*runs times, alternately without and with memory
// limits of limitFactor times the peak sizes in rss, and measures their cold starts; a
// process that exits (an OOM kill) or a start that crawls ends the measure. The binaries run
// from copies whose pages are not in the page cache, so that, as in a container started
// afresh, each process's cgroup is charged for the pages of its binary it maps (the "file"
// part of its resident size); the starts without limits, from such copies too, separate the
// limits' cost from that of reading the binaries from disk.
func (e *env) limitedColdStart(ctx context.Context, ns string, size, runs int, rss map[string]map[string]float64, coldMs float64) (*Limited, error) {
	out := &Limited{Factor: limitFactor, Processes: map[string]LimitedProcess{}}
	limits := map[string]uint64{}
	for _, name := range []string{"watcher", "translator", "pusher"} {
		limits[name] = uint64(limitFactor * rss[name]["peak"] * (1 << 20))
		out.Processes[name] = LimitedProcess{LimitMiB: float64(limits[name]) / (1 << 20)}
	}
	// A start short of memory may crawl rather than fail: it is given five times the
	// unconstrained one, and at least a minute.
	last, timeout := host(ns, size-1), max(time.Minute, 5*time.Duration(coldMs)*time.Millisecond)
	var cold, fresh []float64
	for i := 0; i < runs && out.Error == ""; i++ {
		for _, lim := range []map[string]uint64{nil, limits} {
			what := "without limits"
			if lim != nil {
				what = "under memory limits"
			}
			prog.step(fmt.Sprintf("%d Ingresses: cold start %d of %d from fresh binaries, %s", size, i+1, runs, what), 0)
			took, err := e.freshColdStart(ctx, ns, last, timeout, lim, out)
			if err != nil {
				return nil, err
			}
			if out.Error != "" {
				break
			}
			if lim != nil {
				cold = append(cold, took)
			} else {
				fresh = append(fresh, took)
			}
		}
	}
	if out.Error == "" {
		out.ColdStartMs, out.FreshColdStartMs = median(cold), median(fresh)
	}
	return out, nil
}

// freshColdStart is one cold start of limitedColdStart, from copies of the binaries out of
// the page cache, each process under its limit in limits when not nil (adding what its
// cgroup counted to out). It returns the start's time, or sets out.Error when it did not complete.
func (e *env) freshColdStart(ctx context.Context, ns, last string, timeout time.Duration, limits map[string]uint64, out *Limited) (float64, error) {
	dir, err := os.MkdirTemp("", "sluice-bench-limited-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	for _, name := range []string{"watcher", "translator", "pusher"} {
		if err := uncachedCopy(filepath.Join(e.bin, name), filepath.Join(dir, name)); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	st, err := stack.Start(ctx, stack.Config{Cluster: e.c, BinDir: dir, Dir: dir, Namespaces: []string{ns},
		WatcherArgs: []string{"--kube-qps", "1000", "--kube-burst", "2000"}, MemoryLimits: limits})
	if err != nil {
		return 0, err
	}
	defer st.Stop()
	procs := []*testenv.Process{st.Watcher, st.Translator, st.Pusher}
	if _, err := waitServed(st.HTTPAddr(), last, timeout, procs...); err != nil {
		out.Error = err.Error()
	}
	took := ms(time.Since(start))
	if limits == nil {
		return took, nil
	}
	for _, p := range procs {
		s, err := p.MemoryStats()
		if err != nil {
			return 0, fmt.Errorf("%s: %w", p.Name(), err)
		}
		lp := out.Processes[p.Name()]
		lp.PeakMiB = max(lp.PeakMiB, float64(s.Peak)/(1<<20))
		lp.OOMKills += s.OOMKills
		lp.MajorFaults = max(lp.MajorFaults, s.MajorFaults)
		lp.Exited = lp.Exited || p.Exited()
		out.Processes[p.Name()] = lp
	}
	return took, nil
}

// uncachedCopy copies the executable src to dst and drops dst's pages from the page cache,
// so that the next process to map them is charged for them.
func uncachedCopy(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	// Dirty pages cannot be dropped: written back first.
	if err := out.Sync(); err != nil {
		return err
	}
	if err := unix.Fadvise(int(out.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("drop %s from the page cache: %w", dst, err)
	}
	return out.Close()
}

// routing runs the same load through the stack's Caddy (the module) and then through a
// stock Caddy loaded with the stack's current config by /load, one after the other.
func (e *env) routing(ctx context.Context, st *stack.Stack, ns string, size int) (*Routing, error) {
	hosts := make([]string, size)
	for i := range hosts {
		hosts[i] = host(ns, i)
	}
	rt := &Routing{Conns: routeConns, DurationMs: ms(routeDuration)}
	prog.step(fmt.Sprintf("%d Ingresses: request routing through the module's Caddy (%d clients, %s)", size, routeConns, routeDuration), 0)
	rt.Module = load(ctx, st.HTTPAddr(), hosts, routeConns, routeDuration)
	final, err := currentConfig(ctx, st.TranslatorAddr)
	if err != nil {
		return nil, err
	}
	cd, err := testenv.StartStockCaddy(ctx)
	if err != nil {
		return nil, err
	}
	defer cd.Kill()
	httpAddr := fmt.Sprintf("127.0.0.1:%d", cd.HTTPPort)
	target, err := caddy.New(caddy.Config{Admin: cd.AdminURL, Render: caddy.RenderOptions{HTTPListen: httpAddr, HTTPSListen: fmt.Sprintf("127.0.0.1:%d", cd.HTTPSPort)}})
	if err != nil {
		return nil, err
	}
	if err := target.Apply(ctx, final); err != nil {
		return nil, fmt.Errorf("stock Caddy /load for the routing measure: %w", err)
	}
	if _, err := waitServed(httpAddr, hosts[len(hosts)-1], scaled(time.Minute, time.Second, size)); err != nil {
		return nil, fmt.Errorf("stock Caddy: %w", err)
	}
	prog.step(fmt.Sprintf("%d Ingresses: request routing through stock Caddy (%d clients, %s)", size, routeConns, routeDuration), 0)
	rt.Stock = load(ctx, httpAddr, hosts, routeConns, routeDuration)
	return rt, nil
}

// follower follows the translator's config stream as a pusher does (the chain checked
// against every state hash) and records when each virtual host first arrived and how many
// bytes the stream carried: a pusher's receipt, without its apply.
type follower struct {
	mu      sync.Mutex
	arrived map[string]time.Time
	bytes   float64
	changed chan struct{}
	err     error
}

func follow(ctx context.Context, addr string) (*follower, error) {
	conn, err := grpcx.Dial(addr, grpcx.ClientConfig{})
	if err != nil {
		return nil, err
	}
	stream, err := configv1.NewConfigServiceClient(conn).StreamConfig(ctx)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if err := stream.Send(&configv1.StreamConfigRequest{Message: &configv1.StreamConfigRequest_Hello{Hello: &configv1.Hello{
		PusherId: "bench-follower", DataPlane: configv1.DataPlaneKind_DATA_PLANE_KIND_NONE, TakesChunks: true}}}); err != nil {
		conn.Close()
		return nil, err
	}
	f := &follower{arrived: map[string]time.Time{}, changed: make(chan struct{}, 1)}
	go func() {
		defer conn.Close()
		var chain contract.Chain
		for {
			m, err := stream.Recv()
			now := time.Now()
			var v *configv1.Config
			if err == nil {
				v, err = chain.Receive(m)
			}
			if err != nil {
				f.fail(err)
				return
			}
			var hosts []string
			var complete *configv1.Resources
			switch {
			case m.GetConfig() != nil:
				complete = m.GetConfig().GetResources()
			case v != nil && m.GetDelta() == nil:
				complete = chain.State.Resources() // a complete state, assembled from its chunks
			}
			for _, vh := range complete.GetVirtualHosts() {
				hosts = append(hosts, vh.GetHostname())
			}
			for _, vh := range m.GetDelta().GetVirtualHosts() {
				hosts = append(hosts, vh.GetHostname())
			}
			f.mu.Lock()
			f.bytes += float64(proto.Size(m))
			for _, h := range hosts {
				if _, ok := f.arrived[h]; !ok {
					f.arrived[h] = now
				}
			}
			f.mu.Unlock()
			select {
			case f.changed <- struct{}{}:
			default:
			}
		}
	}()
	return f, nil
}

func (f *follower) fail(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *follower) streamBytes() float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bytes
}

// waitHost returns when host h first arrived on the config stream.
func (f *follower) waitHost(h string, d time.Duration) (time.Time, error) {
	deadline := time.After(d)
	for {
		f.mu.Lock()
		at, ok := f.arrived[h]
		err := f.err
		f.mu.Unlock()
		switch {
		case ok:
			return at, nil
		case err != nil:
			return time.Time{}, fmt.Errorf("config stream: %w", err)
		}
		select {
		case <-f.changed:
		case <-deadline:
			return time.Time{}, fmt.Errorf("%s not on the config stream within %s", h, d)
		}
	}
}

func withRV(e *env, ns, name string, extra int) *discoveryv1.EndpointSlice {
	s := e.slice(name, extra)
	cur, err := e.cs.DiscoveryV1().EndpointSlices(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err == nil {
		s.ResourceVersion = cur.ResourceVersion
	}
	return s
}

// changes creates n Ingresses one at a time and measures each until the config stream
// carries it (config) and until Caddy serves it (served). Each change comes after a pause
// longer than the holdoff, so that it finds the translator as the measure says (idle: quiet;
// churn: busy only with the churn), not still coalescing the change before it.
// changePause separates the changes of a measure: ten times the default holdoff.
const changePause = 100 * time.Millisecond

func (e *env) changes(ctx context.Context, st *stack.Stack, f *follower, ns, tag string, n, ingresses int) (config, served []float64, objBytes float64, _ error) {
	wait := scaled(time.Minute, time.Second, ingresses)
	var size float64
	enc := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	prog.step(fmt.Sprintf("%s: change to served, %s", ns, tag), n)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s%d", tag, i)
		h := fmt.Sprintf("%s.%s.bench.example.com", name, ns)
		ing := ingress("app0", h)
		ing.Name = name
		time.Sleep(changePause)
		start := time.Now()
		created, err := e.cs.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{})
		if err != nil {
			return nil, nil, 0, err
		}
		if _, err := waitServed(st.HTTPAddr(), h, wait); err != nil {
			return nil, nil, 0, err
		}
		served = append(served, ms(time.Since(start)))
		at, err := f.waitHost(h, wait)
		if err != nil {
			return nil, nil, 0, err
		}
		config = append(config, ms(at.Sub(start)))
		var buf bytes.Buffer
		created.ManagedFields = nil
		created.SetGroupVersionKind(networkingv1.SchemeGroupVersion.WithKind("Ingress"))
		_ = enc.Encode(created, &buf)
		size += float64(buf.Len())
		prog.add(1)
	}
	return config, served, size / float64(n), nil
}

func currentConfig(ctx context.Context, addr string) (*configv1.Config, error) {
	conn, err := grpcx.Dial(addr, grpcx.ClientConfig{})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	st, err := configv1.NewConfigServiceClient(conn).GetStatus(ctx, &configv1.GetStatusRequest{IncludeResources: true})
	if err != nil {
		return nil, err
	}
	return st.GetCurrent(), nil
}

// profileColdStart records CPU profiles of the translator and the watcher from their start
// for three times the informer list (2 to 60 s: about the cold start), into profDir, and
// sends the top of the translator's when both are written ("" when they could not be).
// The processes' pprof listeners may not be up yet: each is tried until it answers.
func (e *env) profileColdStart(pprofAddr map[string]string, profDir string, size int, listMs float64) <-chan string {
	secs := int(min(60, max(2, 3*listMs/1000)))
	out := make(chan string, 1)
	go func() {
		errs := make(chan error, 2)
		for _, name := range []string{"translator", "watcher"} {
			go func() {
				url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprofAddr[name], secs)
				path := filepath.Join(profDir, fmt.Sprintf("%s-coldstart-%d.pprof", name, size))
				deadline := time.Now().Add(10 * time.Second)
				for {
					err := fetch(url, path)
					if err == nil || time.Now().After(deadline) {
						errs <- err
						return
					}
					time.Sleep(10 * time.Millisecond) // the listener is not up yet: nothing to wait on
				}
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				fmt.Fprintf(os.Stderr, "bench: %d Ingresses: cold-start profile: %v\n", size, err)
				out <- ""
				return
			}
		}
		top, _ := exec.Command("go", "tool", "pprof", "-top", "-nodecount=25", filepath.Join(profDir, fmt.Sprintf("translator-coldstart-%d.pprof", size))).Output()
		out <- string(top)
	}()
	return out
}

func fetch(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

func machine() map[string]string {
	cpu := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return map[string]string{"cpus": strconv.Itoa(runtime.NumCPU()), "cpu": cpu, "go": runtime.Version(), "loadavg": load,
		"kube-apiserver": "v1.37.2", "etcd": "v3.6.16", "caddy": "v2.11.9", "date": time.Now().UTC().Format(time.RFC3339)}
}

func print(r Result) {
	fmt.Printf("bench: %d Ingresses: cold start %.0f ms vs informer %.0f ms + module apply %.0f ms (ratio %.2f; stock Caddy load %.0f ms); change idle p50 %.0f p99 %.0f ms, churn p50 %.0f p99 %.0f ms\n",
		r.Ingresses, r.ColdStartMs, r.InformerListMs, r.ModuleApplyMs, r.ColdRatio, r.CaddyLoadMs, r.IdleP50Ms, r.IdleP99Ms, r.ChurnP50Ms, r.ChurnP99Ms)
	if rt := r.Routing; rt != nil {
		fmt.Printf("bench: %d Ingresses: routing module %.0f rps p50 %.2f p99 %.2f ms (%d errors), stock %.0f rps p50 %.2f p99 %.2f ms (%d errors)\n",
			r.Ingresses, rt.Module.RPS, rt.Module.P50Ms, rt.Module.P99Ms, rt.Module.Errors, rt.Stock.RPS, rt.Stock.P50Ms, rt.Stock.P99Ms, rt.Stock.Errors)
	}
}
