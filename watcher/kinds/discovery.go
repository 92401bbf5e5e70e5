package kinds

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	discoveryv1client "k8s.io/client-go/kubernetes/typed/discovery/v1"
	networkingv1client "k8s.io/client-go/kubernetes/typed/networking/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-io/sluice/internal/backoff"
)

// Causes records, per kind, why it has not synced yet. It is safe for concurrent use: the
// informers' error handlers write it, the barrier reads it.
type Causes struct {
	mu sync.Mutex
	m  map[string]error
}

// Set records err as the cause for kind (nil clears it).
func (c *Causes) Set(kind string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]error{}
	}
	if err == nil {
		delete(c.m, kind)
		return
	}
	c.m[kind] = err
}

// Get returns the cause recorded for kind.
func (c *Causes) Get(kind string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[kind]
}

// The first discovery is retried quickly: the watcher has nothing to serve until it is done.
const (
	resolveBackoffMin = 200 * time.Millisecond
	resolveBackoffMax = 2 * time.Second
)

// Resolve decides, from discovery, which kinds to watch (Decide): each kind's version and
// scope. An optional kind the apiserver does not serve is dropped, and said so; a required
// one is waited for. Discovery that fails (apiserver unreachable) decides nothing: Resolve
// retries until every kind is decided or ctx ends, recording in causes why each pending kind
// is not resolved.
func Resolve(ctx context.Context, log hclog.Logger, disco discovery.DiscoveryInterface, mode GatewayAPIMode, specs []Spec, causes *Causes) (Decision, error) {
	bo := backoff.New(resolveBackoffMin, resolveBackoffMax)
	for {
		d := Decide(mode, specs, Probe(disco, GroupVersions(WithGateway(mode, specs))))
		for _, s := range WithGateway(mode, specs) {
			causes.Set(s.String(), d.Pending[s.String()])
		}
		if d.Decided() {
			for _, k := range d.Watch {
				log.Debug("kind resolved", "kind", k.Spec.String(), "gvk", k.GVK.String(), "namespaced", k.Namespaced, "required", k.Required)
			}
			for _, s := range d.Skipped {
				log.Info("optional kind not served by the apiserver; not watched", "kind", s.String())
			}
			return d, nil
		}
		if err := bo.Wait(ctx); err != nil {
			return Decision{}, err
		}
	}
}

// Probe asks discovery about each group version of gvs: what it serves, or why it could not
// say. A group version that does not exist (404) is left out of both maps.
func Probe(disco discovery.DiscoveryInterface, gvs []string) Served {
	out := Served{Resources: map[string][]metav1.APIResource{}, Failed: map[string]error{}}
	for _, gv := range gvs {
		list, err := disco.ServerResourcesForGroupVersion(gv)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			out.Failed[gv] = err
		default:
			out.Resources[gv] = list.APIResources
		}
	}
	return out
}

// Informers builds the informers of k: one per namespace of namespaces for a namespaced kind
// (all namespaces when namespaces is empty), one for a cluster-scoped kind, each times the
// spec's field selector alternatives (an object matches at most one: they name values of one
// field). Namespaces
// themselves, when namespaces is not empty, get one informer per namespace watched, each
// reading that Namespace alone (a metadata.name field selector): routes come only from the
// namespaces watched, so only their labels matter, and RBAC can grant exactly those
// (resourceNames) instead of every Namespace of the cluster. The kinds Sluice reads by
// default get typed informers (protobuf on the wire to the apiserver and onward); others, a
// custom resource or a built-in kind of another group, dynamic ones (JSON).
func (k *Kind) Informers(cs Clients, dyn dynamic.Interface, namespaces []string) ([]cache.SharedIndexInformer, error) {
	scopes := []string{metav1.NamespaceAll}
	if k.Namespaced && len(namespaces) > 0 {
		scopes = namespaces
	}
	named := []string{""}
	if k.GVR == NamespacesGVR && !k.Namespaced && len(namespaces) > 0 {
		named = namespaces
	}
	var out []cache.SharedIndexInformer
	for _, ns := range scopes {
		for _, name := range named {
			for _, sel := range k.Selectors() {
				inf, err := k.informer(cs, dyn, ns, name, sel)
				if err != nil {
					return nil, err
				}
				out = append(out, inf)
			}
		}
	}
	return out, nil
}

// informer builds one informer of k in namespace ns (all for "") with field selector
// selector (one of the spec's alternatives), reading only the object named name when name is
// not empty.
func (k *Kind) informer(cs Clients, dyn dynamic.Interface, ns, name, selector string) (cache.SharedIndexInformer, error) {
	if name != "" {
		byName := fields.OneTermEqualSelector("metadata.name", name).String()
		if selector != "" {
			byName = selector + "," + byName
		}
		selector = byName
	}
	tweak := func(o *metav1.ListOptions) {
		if selector != "" {
			o.FieldSelector = selector
		}
	}
	var inf cache.SharedIndexInformer
	if typed, ok := typedInformers[k.GVR]; ok {
		inf = typed(cs, ns, tweak)
	} else {
		inf = dynamicinformer.NewFilteredDynamicInformer(dyn, k.GVR, ns, 0, cache.Indexers{}, tweak).Informer()
	}
	if err := inf.SetTransform(k.Transform()); err != nil {
		return nil, err
	}
	return inf, nil
}

// Clients are the API groups of the kinds the watcher reads with typed informers; client-go's
// clientset has them. The watcher builds only these groups' clients: client-go's clientset
// and informer factory name every API group's client and informer, all linked in and their
// code resident, for kinds the watcher never reads (docs/design.md, "Cold start").
type Clients interface {
	CoreV1() corev1client.CoreV1Interface
	NetworkingV1() networkingv1client.NetworkingV1Interface
	DiscoveryV1() discoveryv1client.DiscoveryV1Interface
}

// typedInformers build the typed informers of the kinds Sluice reads by default, without
// the namespace index client-go's informers add: the watcher looks objects up only by key
// (its store serves the streams), and at 10k Ingresses that index held a set entry and a map
// entry for each of the cluster's objects (docs/design.md, "Cold start"). A cluster-scoped
// kind ignores ns ("").
var typedInformers = map[schema.GroupVersionResource]func(cs Clients, ns string, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer{
	{Version: "v1", Resource: "services"}: func(cs Clients, ns string, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
		return typedInformer(cs, cs.CoreV1().Services(ns), &corev1.Service{}, tweak)
	},
	{Version: "v1", Resource: "secrets"}: func(cs Clients, ns string, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
		return typedInformer(cs, cs.CoreV1().Secrets(ns), &corev1.Secret{}, tweak)
	},
	{Version: "v1", Resource: "configmaps"}: func(cs Clients, ns string, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
		return typedInformer(cs, cs.CoreV1().ConfigMaps(ns), &corev1.ConfigMap{}, tweak)
	},
	{Version: "v1", Resource: "namespaces"}: func(cs Clients, _ string, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
		return typedInformer(cs, cs.CoreV1().Namespaces(), &corev1.Namespace{}, tweak)
	},
	{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}: func(cs Clients, ns string, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
		return typedInformer(cs, cs.DiscoveryV1().EndpointSlices(ns), &discoveryv1.EndpointSlice{}, tweak)
	},
	{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}: func(cs Clients, ns string, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
		return typedInformer(cs, cs.NetworkingV1().Ingresses(ns), &networkingv1.Ingress{}, tweak)
	},
	{Group: "networking.k8s.io", Version: "v1", Resource: "ingressclasses"}: func(cs Clients, _ string, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
		return typedInformer(cs, cs.NetworkingV1().IngressClasses(), &networkingv1.IngressClass{}, tweak)
	},
}

// listerWatcher is a typed client of one resource (in one namespace), as client-go's typed
// clients are.
type listerWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// typedInformer is the informer client-go's generated informers build, over c, with tweak
// applied to every list and watch. The client set cs says whether it serves watch lists (a
// fake clientset does not).
func typedInformer[L runtime.Object](cs Clients, c listerWatcher[L], example runtime.Object, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			return c.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			return c.Watch(ctx, o)
		},
	}
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, cs), example, cache.SharedIndexInformerOptions{})
}
