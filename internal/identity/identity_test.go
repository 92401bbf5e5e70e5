package identity

import (
	"crypto/x509"
	"net/url"
	"strings"
	"testing"
)

// The identities of docs/operations.md, "Security model": what parses, what each names,
// and what a certificate must carry.
func TestParseIdentities(t *testing.T) {
	cases := []struct {
		uri  string
		want Identity
		err  string
	}{
		{"spiffe://cluster.local/sluice/watcher", Identity{"cluster.local", Watcher, ""}, ""},
		{"spiffe://cluster.local/sluice/translator/sluice", Identity{"cluster.local", Translator, "sluice"}, ""},
		{"spiffe://cluster.local/sluice/pusher", Identity{"cluster.local", Pusher, ""}, ""},
		{"spiffe://cluster.local/sluice/operator", Identity{"cluster.local", Operator, ""}, ""},
		{"spiffe://cluster.local/sluice/translator", Identity{}, "names its IngressClass"},
		{"spiffe://cluster.local/sluice/pusher/extra", Identity{}, "want spiffe://cluster.local/sluice/pusher"},
		{"spiffe://other.domain/sluice/watcher", Identity{}, "trust domain"},
		{"spiffe://cluster.local/sluice/root", Identity{}, "unknown role"},
		{"spiffe://cluster.local/ns/default/sa/x", Identity{}, "want spiffe://cluster.local/sluice/<role>"},
		{"https://cluster.local/sluice/watcher", Identity{}, "not a spiffe"},
		{"spiffe://cluster.local:443/sluice/watcher", Identity{}, "trust domain"},
	}
	for _, c := range cases {
		got, err := Parse(c.uri, "cluster.local")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one saying %q", c.uri, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want || got.URI() != c.uri {
			t.Errorf("%s: %+v %v, want %+v", c.uri, got, err, c.want)
		}
	}
}

func certWith(uris ...string) *x509.Certificate {
	c := &x509.Certificate{}
	for _, u := range uris {
		p, _ := url.Parse(u)
		c.URIs = append(c.URIs, p)
	}
	return c
}

// A certificate names one identity: none, or two, is refused; SANs of other trust domains
// or schemes are ignored.
func TestFromCertificate(t *testing.T) {
	if id, err := FromCertificate(certWith("https://example.com", "spiffe://cluster.local/sluice/pusher", "spiffe://x/sluice/watcher"), "cluster.local"); err != nil || id.Role != Pusher {
		t.Fatalf("got %v %v, want the pusher", id, err)
	}
	if _, err := FromCertificate(certWith(), "cluster.local"); err == nil {
		t.Fatal("a certificate without identity was accepted")
	}
	if _, err := FromCertificate(certWith("spiffe://cluster.local/sluice/pusher", "spiffe://cluster.local/sluice/operator"), "cluster.local"); err == nil {
		t.Fatal("a certificate with two identities was accepted")
	}
}

// The policy of docs/operations.md, "Security model", rule by rule.
func TestDefaultPolicy(t *testing.T) {
	p := DefaultPolicy()
	as := func(r Role) Caller { return Caller{Identity: Identity{TrustDomain: "cluster.local", Role: r}} }
	cases := []struct {
		method string
		want   map[Role]Access
	}{
		{"/sluice.watch.v1.WatchService/Watch", map[Role]Access{Translator: Full, Operator: Redacted, Pusher: Denied, Watcher: Denied}},
		{"/sluice.watch.v1.StatusService/ReportStatus", map[Role]Access{Translator: Full, Watcher: Full, Pusher: Denied, Operator: Denied}},
		{"/sluice.config.v1.ConfigService/StreamConfig", map[Role]Access{Pusher: Full, Operator: Redacted, Translator: Denied, Watcher: Denied}},
		{"/sluice.config.v1.ConfigService/GetStatus", map[Role]Access{Operator: Redacted, Pusher: Denied, Translator: Denied, Watcher: Denied}},
		{HealthCheck, map[Role]Access{Operator: Redacted, Pusher: Redacted, Translator: Redacted, Watcher: Redacted}},
		{ReflectionV1, map[Role]Access{Operator: Redacted, Pusher: Denied, Translator: Denied, Watcher: Denied}},
		{"/some.Other/Method", map[Role]Access{Operator: Denied, Pusher: Denied, Translator: Denied, Watcher: Denied}},
	}
	for _, c := range cases {
		for r, want := range c.want {
			if got, _ := p.Decide(c.method, as(r)); got != want {
				t.Errorf("%s as %s: %s, want %s", c.method, r, got, want)
			}
		}
	}
	if got, _ := p.Decide("/sluice.watch.v1.WatchService/Watch", Caller{Anonymous: true}); got != Full {
		t.Errorf("anonymous (authorization off): %s, want full", got)
	}
	if got, reason := p.Decide(HealthCheck, Caller{Err: ErrNoIdentity}); got != Denied || reason == "" {
		t.Errorf("a certificate without identity: %s %q, want denied with a reason", got, reason)
	}
}
