package contract

import (
	"sort"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// Refusal names one resource of a config a data plane refused, as the config names it: a
// route (Route, on the virtual host Host, "" for the catch-all), a certificate
// (Certificate) or a backend (Backend, whose TLS settings the translator checks with the
// same rule, contract.BackendTLSConfig, so that it names no source: it is never expected). The Sluice Caddy module sends them as JSON beside its error (RefusedHeader); the pusher
// traces them to their source objects (SourcesOf) for the NACK.
type Refusal struct {
	Host        string `json:"host,omitempty"`
	Route       string `json:"route,omitempty"`
	Certificate string `json:"certificate,omitempty"`
	Backend     string `json:"backend,omitempty"`
}

// RefusedHeader is the response header in which the Sluice Caddy module's 422 answer names
// the refused resources: a JSON array of Refusal.
const RefusedHeader = "Sluice-Refused"

// MaxRefusals bounds the refusals a data plane names for one config: the objects beyond are
// found on a later version.
const MaxRefusals = 100

// SourcesOf returns the source objects of the refused resources, each once, in key order:
// a route's source (its Ingress or HTTPRoute) and a certificate's (its Secret). vh and cert
// look a virtual host or certificate up by name; a refusal of something the config does not
// hold names nothing.
func SourcesOf(refused []Refusal, vh func(host string) *configv1.VirtualHost, cert func(name string) *configv1.Certificate) []*configv1.ObjectRef {
	seen := map[string]*configv1.ObjectRef{}
	add := func(o *configv1.ObjectRef) {
		if o.GetKind() != "" && o.GetName() != "" {
			seen[KeyOfObject(o)] = o
		}
	}
	for _, r := range refused {
		switch {
		case r.Route != "":
			for _, rt := range vh(r.Host).GetRoutes() {
				if rt.GetName() == r.Route {
					add(rt.GetSource())
				}
			}
		case r.Certificate != "":
			add(cert(r.Certificate).GetSource())
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*configv1.ObjectRef, 0, len(keys))
	for _, k := range keys {
		out = append(out, seen[k])
	}
	return out
}
