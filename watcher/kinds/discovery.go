package kinds

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	corev1informers "k8s.io/client-go/informers/core/v1"
	discoveryv1informers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/informers/internalinterfaces"
	networkingv1informers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/kubernetes"
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
// (resourceNames) instead of every Namespace of the cluster. Built-in types get typed
// informers (protobuf on the wire to the apiserver and onward); others dynamic ones.
func (k *Kind) Informers(cs kubernetes.Interface, dyn dynamic.Interface, namespaces []string) ([]cache.SharedIndexInformer, error) {
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
func (k *Kind) informer(cs kubernetes.Interface, dyn dynamic.Interface, ns, name, selector string) (cache.SharedIndexInformer, error) {
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
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns), informers.WithTweakListOptions(tweak))
	if typed, ok := unindexed[k.GVR]; ok {
		inf = typed(cs, ns, 0, cache.Indexers{}, tweak)
	} else if gi, err := f.ForResource(k.GVR); err == nil {
		inf = gi.Informer()
	} else {
		inf = dynamicinformer.NewFilteredDynamicInformer(dyn, k.GVR, ns, 0, cache.Indexers{}, tweak).Informer()
	}
	if err := inf.SetTransform(k.Transform()); err != nil {
		return nil, err
	}
	return inf, nil
}

// unindexed builds the typed informers of the kinds Sluice reads by default without the
// namespace index the informer factory adds to every informer: the watcher looks objects up
// only by key (its store serves the streams), and at 10k Ingresses that index held a set
// entry and a map entry for each of the cluster's objects (docs/design.md, "Cold start").
// Other kinds take the factory's informer.
var unindexed = map[schema.GroupVersionResource]func(kubernetes.Interface, string, time.Duration, cache.Indexers, internalinterfaces.TweakListOptionsFunc) cache.SharedIndexInformer{
	{Version: "v1", Resource: "services"}:                                   corev1informers.NewFilteredServiceInformer,
	{Version: "v1", Resource: "secrets"}:                                    corev1informers.NewFilteredSecretInformer,
	{Version: "v1", Resource: "configmaps"}:                                 corev1informers.NewFilteredConfigMapInformer,
	{Version: "v1", Resource: "namespaces"}:                                 namespaceInformer,
	{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}:  discoveryv1informers.NewFilteredEndpointSliceInformer,
	{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}:      networkingv1informers.NewFilteredIngressInformer,
	{Group: "networking.k8s.io", Version: "v1", Resource: "ingressclasses"}: clusterScoped(networkingv1informers.NewFilteredIngressClassInformer),
}

// namespaceInformer is the Namespaces' informer of that shape (cluster-scoped: ns is "").
func namespaceInformer(cs kubernetes.Interface, _ string, resync time.Duration, idx cache.Indexers, tweak internalinterfaces.TweakListOptionsFunc) cache.SharedIndexInformer {
	return corev1informers.NewFilteredNamespaceInformer(cs, resync, idx, tweak)
}

// clusterScoped adapts a cluster-scoped kind's informer constructor to that shape.
func clusterScoped(f func(kubernetes.Interface, time.Duration, cache.Indexers, internalinterfaces.TweakListOptionsFunc) cache.SharedIndexInformer) func(kubernetes.Interface, string, time.Duration, cache.Indexers, internalinterfaces.TweakListOptionsFunc) cache.SharedIndexInformer {
	return func(cs kubernetes.Interface, _ string, resync time.Duration, idx cache.Indexers, tweak internalinterfaces.TweakListOptionsFunc) cache.SharedIndexInformer {
		return f(cs, resync, idx, tweak)
	}
}
