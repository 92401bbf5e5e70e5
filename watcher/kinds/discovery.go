package kinds

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
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

// Resolve decides, from discovery, what each spec is: its kind and scope. An optional kind
// the apiserver does not serve is dropped, once, and said so; a required one is waited for.
// Discovery that fails (apiserver unreachable) decides nothing: Resolve retries until every
// spec is decided or ctx ends, recording in causes why each pending kind is not resolved.
func Resolve(ctx context.Context, log hclog.Logger, disco discovery.DiscoveryInterface, specs []Spec, causes *Causes) ([]*Kind, error) {
	decided := make([]*Kind, len(specs))
	skipped := make([]bool, len(specs))
	backoff := 200 * time.Millisecond
	for {
		pending := 0
		for i, s := range specs {
			if decided[i] != nil || skipped[i] {
				continue
			}
			k, err := resolveOne(disco, s)
			switch {
			case err == nil:
				decided[i] = k
				causes.Set(s.String(), nil)
				log.Debug("kind resolved", "kind", s.String(), "gvk", k.GVK.String(), "namespaced", k.Namespaced, "required", s.Required)
			case errors.Is(err, ErrNotServed) && !s.Required:
				skipped[i] = true
				log.Info("optional kind not served by the apiserver; not watched", "kind", s.String())
			default:
				causes.Set(s.String(), err)
				pending++
			}
		}
		if pending == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
	var out []*Kind
	for _, k := range decided {
		if k != nil {
			out = append(out, k)
		}
	}
	SortKinds(out)
	return out, nil
}

func resolveOne(disco discovery.DiscoveryInterface, s Spec) (*Kind, error) {
	gv := s.GVR.GroupVersion().String()
	list, err := disco.ServerResourcesForGroupVersion(gv)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: group version %s does not exist", ErrNotServed, gv)
	}
	if err != nil {
		return nil, fmt.Errorf("discovery of %s: %w", gv, err)
	}
	for _, r := range list.APIResources {
		if r.Name == s.GVR.Resource {
			return &Kind{Spec: s, GVK: s.GVR.GroupVersion().WithKind(r.Kind), Namespaced: r.Namespaced, Served: true}, nil
		}
	}
	return nil, fmt.Errorf("%w: group version %s has no resource %q", ErrNotServed, gv, s.GVR.Resource)
}

// Informers builds the informers of k: one per namespace of namespaces for a namespaced kind
// (all namespaces when namespaces is empty), one for a cluster-scoped kind. Built-in types get
// typed informers (protobuf on the wire to the apiserver and onward); others dynamic ones.
func (k *Kind) Informers(cs kubernetes.Interface, dyn dynamic.Interface, namespaces []string) ([]cache.SharedIndexInformer, error) {
	scopes := []string{metav1.NamespaceAll}
	if k.Namespaced && len(namespaces) > 0 {
		scopes = namespaces
	}
	tweak := func(o *metav1.ListOptions) {
		if k.FieldSelector != "" {
			o.FieldSelector = k.FieldSelector
		}
	}
	var out []cache.SharedIndexInformer
	for _, ns := range scopes {
		var inf cache.SharedIndexInformer
		f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns), informers.WithTweakListOptions(tweak))
		if gi, err := f.ForResource(k.GVR); err == nil {
			inf = gi.Informer()
		} else {
			inf = dynamicinformer.NewFilteredDynamicInformer(dyn, k.GVR, ns, 0, cache.Indexers{}, tweak).Informer()
		}
		if err := inf.SetTransform(k.Transform()); err != nil {
			return nil, err
		}
		out = append(out, inf)
	}
	return out, nil
}
