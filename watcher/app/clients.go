package app

import (
	"errors"
	"fmt"

	"k8s.io/client-go/discovery"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	discoveryv1client "k8s.io/client-go/kubernetes/typed/discovery/v1"
	networkingv1client "k8s.io/client-go/kubernetes/typed/networking/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// kubeClients are the Kubernetes API groups the watcher calls, built as client-go's clientset
// builds each of its groups (one HTTP client, one rate limiter), but only these: the kinds
// read with typed informers (kinds.Clients), discovery, and for the status writer and the
// leader election, Ingresses, Events and Leases. The clientset builds every API group's
// client, so all of them were linked into the watcher, and most of its code was of kinds
// it never reads (docs/design.md, "Cold start").
type kubeClients struct {
	core         *corev1client.CoreV1Client
	networking   *networkingv1client.NetworkingV1Client
	discoveryV1  *discoveryv1client.DiscoveryV1Client
	coordination *coordinationv1client.CoordinationV1Client
	discovery    *discovery.DiscoveryClient
}

// newKubeClients builds the clients over cfg, named purpose in errors.
func newKubeClients(cfg *rest.Config, purpose string) (*kubeClients, error) {
	c := rest.CopyConfig(cfg)
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if c.RateLimiter == nil && c.QPS > 0 {
		if c.Burst <= 0 {
			return nil, fmt.Errorf("kubernetes client for %s: burst is required with qps", purpose)
		}
		c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(c.QPS, c.Burst)
	}
	httpClient, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for %s: %w", purpose, err)
	}
	var out kubeClients
	var errs [5]error
	out.core, errs[0] = corev1client.NewForConfigAndClient(c, httpClient)
	out.networking, errs[1] = networkingv1client.NewForConfigAndClient(c, httpClient)
	out.discoveryV1, errs[2] = discoveryv1client.NewForConfigAndClient(c, httpClient)
	out.coordination, errs[3] = coordinationv1client.NewForConfigAndClient(c, httpClient)
	out.discovery, errs[4] = discovery.NewDiscoveryClientForConfigAndClient(c, httpClient)
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("kubernetes client for %s: %w", purpose, err)
	}
	return &out, nil
}

func (c *kubeClients) CoreV1() corev1client.CoreV1Interface { return c.core }
func (c *kubeClients) NetworkingV1() networkingv1client.NetworkingV1Interface {
	return c.networking
}
func (c *kubeClients) DiscoveryV1() discoveryv1client.DiscoveryV1Interface { return c.discoveryV1 }
func (c *kubeClients) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return c.coordination
}
func (c *kubeClients) Discovery() discovery.DiscoveryInterface { return c.discovery }
