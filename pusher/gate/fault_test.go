package gate

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// refusedNaming is a data plane's rejection that names what it refused.
type refusedNaming []contract.Refusal

func (r refusedNaming) Error() string                { return fmt.Sprintf("refused %v", []contract.Refusal(r)) }
func (refusedNaming) Rejected() bool                 { return true }
func (r refusedNaming) Refusals() []contract.Refusal { return r }

// sourced is a config whose hosts each have one route from Ingress ns/<host>, and the
// certificate ns/tls from Secret ns/tls.
func sourced(epoch string, v uint64, hosts ...string) *configv1.Config {
	res := &configv1.Resources{Certificates: []*configv1.Certificate{{Name: "ns/tls", Source: &configv1.ObjectRef{Kind: "Secret", Namespace: "ns", Name: "tls"}}}}
	for _, h := range hosts {
		res.VirtualHosts = append(res.VirtualHosts, &configv1.VirtualHost{Hostname: h, Routes: []*configv1.Route{{
			Name: "ns/" + h + "/r0", Path: &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"},
			Source: &configv1.ObjectRef{Group: "networking.k8s.io", Kind: "Ingress", Namespace: "ns", Name: h, Uid: "uid-" + h},
		}}})
	}
	return &configv1.Config{Epoch: epoch, Version: v, Hash: contract.Hash(res), Resources: res}
}

func names(objs []*configv1.ObjectRef) string {
	var out []string
	for _, o := range objs {
		out = append(out, contract.KeyOfObject(o))
	}
	return strings.Join(out, ",")
}

// The NACK of a rejection names the source objects of what the data plane refused (routes
// and certificates, traced through the state of the refused version), each once; a
// rejection naming nothing, or nothing the state holds, names no object (the pusher then
// waits for a newer version, as before); the same config coming back is NACKed naming them
// again.
func TestNackNamesTheSourcesOfWhatWasRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"ARoute", refusedNaming{{Host: "a", Route: "ns/a/r0"}}, "Ingress/ns/a"},
		{"RoutesAndACertificateEachOnce", refusedNaming{{Host: "b", Route: "ns/b/r0"}, {Certificate: "ns/tls"}, {Host: "a", Route: "ns/a/r0"}, {Host: "b", Route: "ns/b/r0"}}, "Ingress/ns/a,Ingress/ns/b,Secret/ns/tls"},
		{"ARouteOnAnotherHostIsNotOneOfThisConfig", refusedNaming{{Host: "b", Route: "ns/a/r0"}, {Host: "zzz", Route: "ns/zzz/r0"}, {Certificate: "ns/other"}}, ""},
		{"NamingNothing", refused{}, ""},
		{"NotARejection", errors.New("connection refused"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAdmission(admissionConfig{})
			if err := a.marker(&configv1.InitialSyncComplete{Epoch: "e1", Version: 1}); err != nil {
				t.Fatal(err)
			}
			a.config(sourced("e1", 1, "a", "b"))
			c := a.next()
			if d := a.judge(c.GetHash(), nil); d.act != actPush {
				t.Fatalf("judged %v, want a push", d.act)
			}
			d := a.pushed(tc.err)
			if got := names(d.objects); got != tc.want {
				t.Fatalf("the NACK names %q, want %q", got, tc.want)
			}
			if d.act != actNack {
				return
			}
			a.config(sourced("e1", 2, "a", "b")) // a newer version, the same config
			again := a.judge(a.next().GetHash(), nil)
			if again.act != actNack || names(again.objects) != tc.want {
				t.Fatalf("the same config again: %v naming %q, want a NACK naming %q", again.act, names(again.objects), tc.want)
			}
			if tc.want != "" && !strings.Contains(again.reason, tc.err.Error()) {
				t.Fatalf("the same config again is NACKed with %q, want the data plane's error", again.reason)
			}
		})
	}
}

// A config the data plane cannot render is NACKed naming the sources of the routes the
// renderer refused.
func TestUnrenderableNackNamesTheRefusedRoutes(t *testing.T) {
	a := newAdmission(admissionConfig{})
	if err := a.marker(&configv1.InitialSyncComplete{Epoch: "e1", Version: 1}); err != nil {
		t.Fatal(err)
	}
	a.config(sourced("e1", 1, "a", "b"))
	a.next()
	d := a.judge("", refusedNaming{{Host: "b", Route: "ns/b/r0"}})
	if d.act != actNack || !d.rejected || names(d.objects) != "Ingress/ns/b" {
		t.Fatalf("decided %v (rejected %v) naming %q, want a rejected NACK naming Ingress/ns/b", d.act, d.rejected, names(d.objects))
	}
	if o := d.objects[0]; o.GetUid() != "uid-b" || o.GetGroup() != "networking.k8s.io" {
		t.Fatalf("the object at fault is %v, want the route's source as the config names it", o)
	}
}
