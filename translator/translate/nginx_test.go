package translate

import (
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// nginxCase is the TLS golden's objects (a Service with a ready endpoint, a Secret whose
// certificate covers secure.example.com and *.wild.example.com) and Ingresses.
func nginxCase(t *testing.T, ings ...*networkingv1.Ingress) Input {
	t.Helper()
	in := load(t, "nginx.yaml")
	in.Ingresses = ings
	return in
}

func newIngress(name, host string, annotations map[string]string, tls bool, paths ...networkingv1.HTTPIngressPath) *networkingv1.Ingress {
	class := "sluice"
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "app", Annotations: annotations},
		Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{{Host: host,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}}},
	}
	if tls {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{host}, SecretName: "secure-cert"}}
	}
	return ing
}

func ingressPath(path string, typ networkingv1.PathType, svc string) networkingv1.HTTPIngressPath {
	port := int32(80)
	if svc == "api" {
		port = 81
	}
	return networkingv1.HTTPIngressPath{Path: path, PathType: &typ, Backend: networkingv1.IngressBackend{
		Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: port}}}}
}

func get(scheme, host, path string) contract.Request {
	u, _ := url.Parse(path)
	return contract.Request{Scheme: scheme, Host: host, Method: http.MethodGet, Path: u.Path, RawQuery: u.RawQuery, Query: u.Query(), Header: http.Header{}}
}

// docs/migrating-from-ingress-nginx.md, "HTTPS": a TLS Ingress's host answers plain HTTP
// with 308 to the same URL over HTTPS, as ingress-nginx does by default; not the path of an
// ACME HTTP-01 challenge; not with ssl-redirect "false" (ingress-nginx's annotation or
// Sluice's) nor with the translator's --ssl-redirect=false; force-ssl-redirect redirects a
// host without a certificate too, whatever the flag says.
func TestHTTPSRedirectAsIngressNginx(t *testing.T) {
	prefix := networkingv1.PathTypePrefix
	exact := networkingv1.PathTypeExact
	type probe struct {
		req      contract.Request
		status   int
		location string
	}
	for _, tc := range []struct {
		name   string
		ing    *networkingv1.Ingress
		noFlag bool
		probes []probe
	}{
		{"tls host redirects", newIngress("a", "secure.example.com", nil, true, ingressPath("/", prefix, "web")), false, []probe{
			{get("http", "secure.example.com", "/cart?x=1"), 308, "https://secure.example.com/cart?x=1"},
			{get("http", "secure.example.com:8080", "/cart/"), 308, "https://secure.example.com/cart/"},
			{get("https", "secure.example.com", "/cart"), 200, ""},
		}},
		{"acme challenge stays on http", newIngress("a", "secure.example.com", nil, true,
			ingressPath("/.well-known/acme-challenge/tok", exact, "api"), ingressPath("/", prefix, "web")), false, []probe{
			{get("http", "secure.example.com", "/.well-known/acme-challenge/tok"), 200, ""},
			{get("http", "secure.example.com", "/"), 308, "https://secure.example.com/"},
		}},
		{"nginx annotation off", newIngress("a", "secure.example.com", map[string]string{NginxAnnotationPrefix + "ssl-redirect": "false"}, true, ingressPath("/", prefix, "web")), false, []probe{
			{get("http", "secure.example.com", "/"), 200, ""},
		}},
		{"sluice annotation off", newIngress("a", "secure.example.com", map[string]string{AnnotationSSLRedirect: "false"}, true, ingressPath("/", prefix, "web")), false, []probe{
			{get("http", "secure.example.com", "/"), 200, ""},
		}},
		{"flag off", newIngress("a", "secure.example.com", nil, true, ingressPath("/", prefix, "web")), true, []probe{
			{get("http", "secure.example.com", "/"), 200, ""},
		}},
		{"no certificate, no redirect", newIngress("a", "plain.example.com", nil, false, ingressPath("/", prefix, "web")), false, []probe{
			{get("http", "plain.example.com", "/"), 200, ""},
		}},
		{"forced without certificate, flag off", newIngress("a", "plain.example.com", map[string]string{NginxAnnotationPrefix + "force-ssl-redirect": "true"}, false, ingressPath("/", prefix, "web")), true, []probe{
			{get("http", "plain.example.com", "/a?b=c"), 308, "https://plain.example.com/a?b=c"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := goldenOpts
			opts.NoSSLRedirect = tc.noFlag
			res := Translate(nginxCase(t, tc.ing), opts)
			for _, p := range tc.probes {
				o := contract.OutcomeOf(res, p.req)
				if o.Status != p.status || o.Location != p.location {
					t.Errorf("%s %s://%s%s?%s: %d %q, want %d %q", p.req.Method, p.req.Scheme, p.req.Host, p.req.Path, p.req.RawQuery, o.Status, o.Location, p.status, p.location)
				}
			}
		})
	}
}

// docs/migrating-from-ingress-nginx.md, "rewrite-target": the examples of ingress-nginx's own
// documentation, each path reaching the backend as it says, with paths matched as
// case-insensitive expressions anchored at the start only.
func TestRewriteTargetAsIngressNginx(t *testing.T) {
	impl := networkingv1.PathTypeImplementationSpecific
	for _, tc := range []struct {
		path, target string
		requests     map[string]string // request path -> path the backend gets ("" for 404)
	}{
		{"/something(/|$)(.*)", "/$2", map[string]string{
			"/something": "/", "/something/": "/", "/something/new": "/new", "/SOMETHING/New": "/New", "/other": "",
		}},
		{"/api/(v[0-9]+)/(.*)", "/$2/$1", map[string]string{"/api/v2/users": "/users/v2", "/API/V3/x": "/x/V3"}},
		{"/app(/|$)(.*)", "/backend/$2$1", map[string]string{"/app/x": "/backend/x/"}},
		{"/price", "/cost$", map[string]string{"/price/1": "/cost$"}},
	} {
		ing := newIngress("rw", "rw.example.com", map[string]string{NginxAnnotationPrefix + "rewrite-target": tc.target}, false, ingressPath(tc.path, impl, "api"))
		res := Translate(nginxCase(t, ing), goldenOpts)
		for _, f := range res.GetFindings() {
			t.Errorf("%s -> %s: finding %v", tc.path, tc.target, f)
		}
		for reqPath, want := range tc.requests {
			o := contract.OutcomeOf(res, get("http", "rw.example.com", reqPath))
			got := ""
			if len(o.Forwards) > 0 {
				got = o.Forwards[0].Path
			}
			if got != want {
				t.Errorf("path %s, rewrite-target %s: %s reaches the backend as %q, want %q", tc.path, tc.target, reqPath, got, want)
			}
		}
	}
}

// Every ingress-nginx annotation Sluice does not serve, with a value that asks for something,
// gets a finding that names it (only those that tune what Sluice does not need at all, such
// as nginx's buffer sizes, never do); one that restricts access keeps the Ingress from being
// served at all; an unknown one of the prefix gets a finding too. None is ignored.
func TestNoIngressNginxAnnotationIsIgnored(t *testing.T) {
	prefix := networkingv1.PathTypePrefix
	_, refused := NginxAnnotations()
	for _, name := range append(refused, "made-up-annotation") {
		key := NginxAnnotationPrefix + name
		ing := newIngress("a", "a.example.com", map[string]string{key: "sluice-test-value"}, false, ingressPath("/", prefix, "web"))
		res := Translate(nginxCase(t, ing), goldenOpts)
		var named []*configv1.Finding
		for _, f := range res.GetFindings() {
			if strings.Contains(f.GetField(), key) && strings.Contains(f.GetCause(), key) {
				named = append(named, f)
			}
		}
		if r := nginxRules[name]; r.served != nil && r.served("sluice-test-value") {
			// Buffer sizes and the like: any value asks for nothing Sluice does not do.
			if len(named) != 0 || r.alt != altNotNeeded {
				t.Errorf("%s: served as not needed, yet %v (%q)", key, named, r.alt)
			}
			continue
		}
		if len(named) != 1 {
			t.Errorf("%s: %d findings name it, want 1: %v", key, len(named), res.GetFindings())
			continue
		}
		served := contract.OutcomeOf(res, get("http", "a.example.com", "/")).Status == 200
		if closed := nginxRules[name].closed; served == closed || closed != (named[0].GetSeverity() == sevError && strings.Contains(named[0].GetCause(), "not served")) {
			t.Errorf("%s: served %t, finding %v; want served only when it does not restrict access", key, served, named[0])
		}
	}
}

// docs/migrating-from-ingress-nginx.md lists every ingress-nginx annotation Sluice knows,
// served or not, in its table.
func TestMigrationGuideListsEveryAnnotation(t *testing.T) {
	doc, err := os.ReadFile("../../docs/migrating-from-ingress-nginx.md")
	if err != nil {
		t.Fatal(err)
	}
	served, refused := NginxAnnotations()
	for _, name := range append(served, refused...) {
		if !regexp.MustCompile("(?m)^\\|.*`" + regexp.QuoteMeta(name) + "`").Match(doc) {
			t.Errorf("the migration guide's table does not list %s", name)
		}
	}
	// Each row names what proves it: golden cases that use one of its annotations, and
	// tests that exist.
	tests := testNames(t, "../..")
	rows := regexp.MustCompile("(?m)^\\| `.*\\|$").FindAllString(string(doc), -1)
	if len(rows) < 30 {
		t.Fatalf("found %d rows in the migration guide's table", len(rows))
	}
	for _, row := range rows {
		cells := strings.Split(strings.Trim(row, "| "), " | ")
		annotations := regexp.MustCompile("`([a-z0-9-]+)`").FindAllStringSubmatch(cells[0], -1)
		proof := cells[len(cells)-1]
		goldens := regexp.MustCompile("golden `([a-z0-9-]+)`").FindAllStringSubmatch(proof, -1)
		named := regexp.MustCompile("`(Test[A-Za-z0-9]+)`").FindAllStringSubmatch(proof, -1)
		if len(goldens)+len(named) == 0 {
			t.Errorf("row %q names no golden case nor test that proves it", cells[0])
		}
		for _, g := range goldens {
			data, err := os.ReadFile(filepath.Join("testdata", g[1]+".yaml"))
			if err != nil {
				t.Errorf("row %q: golden %s: %v", cells[0], g[1], err)
				continue
			}
			uses := false
			for _, a := range annotations {
				uses = uses || strings.Contains(string(data), NginxAnnotationPrefix+a[1]+":")
			}
			if !uses {
				t.Errorf("row %q: golden %s uses none of its annotations", cells[0], g[1])
			}
		}
		for _, n := range named {
			if !tests[n[1]] {
				t.Errorf("row %q: no test %s", cells[0], n[1])
			}
		}
	}
}

// testNames are the names of the test functions under root.
func testNames(t *testing.T, root string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	re := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// docs/translation.md, "TLS": --default-certificate's Secret is the catch-all's certificate
// while it is usable, following its Secret as it comes and goes; while it is not, the Secret
// gets a finding that says so and no handshake is answered with it.
func TestDefaultCertificateFollowsItsSecret(t *testing.T) {
	in := load(t, "default-certificate.yaml")
	var secret any
	for _, s := range in.Secrets {
		secret = s
	}
	opts := goldenOpts
	opts.DefaultCertificate = "app/default-cert"
	tr := New(opts)
	for _, o := range in.objects() {
		if o != secret {
			tr.Set(o)
		}
	}
	check := func(step string, want string) {
		t.Helper()
		tr.Build()
		res := tr.State().Resources()
		if got := contract.CertificateFor(res, "unknown.example.org"); got != want {
			t.Errorf("%s: an unknown name gets certificate %q, want %q", step, got, want)
		}
		if got := contract.CertificateFor(res, "missing.example.com"); got != want {
			t.Errorf("%s: a host whose Secret is missing gets certificate %q, want %q", step, got, want)
		}
		var finding *configv1.Finding
		for _, f := range res.GetFindings() {
			if f.GetObject().GetKind() == "Secret" && f.GetObject().GetName() == "default-cert" {
				finding = f
			}
		}
		if (finding == nil) != (want != "") || finding != nil && !strings.Contains(finding.GetCause(), "--default-certificate") {
			t.Errorf("%s: the default certificate's finding %v", step, finding)
		}
		if o := contract.OutcomeOf(res, get("http", "any.example.org", "/any")); o.Status != 200 {
			t.Errorf("%s: a catch-all route over HTTP answers %d, want 200 (no HTTPS redirect for the default certificate)", step, o.Status)
		}
	}
	check("without its Secret", "")
	tr.Set(secret)
	check("with its Secret", "app/default-cert")
	tr.Remove(secret)
	check("its Secret deleted", "")
}

// docs/migrating-from-ingress-nginx.md, "Canary": a canary Ingress's path joins the main
// Ingress's route of the same host, path and pathType, and a request goes where
// ingress-nginx's balancer sends it: by header (always/never, or the exact value, or the
// pattern), then by cookie (always/never, the name in any case), then by weight; the route
// is the main's otherwise (its rewrite, its HTTPS redirect whatever the header).
func TestCanaryAsIngressNginx(t *testing.T) {
	res := Translate(load(t, "nginx-canary.yaml"), goldenOpts)
	const main, canary, api = "app/web:80", "app/web-canary:80", "app/api:81"
	with := func(r contract.Request, kv ...string) contract.Request {
		r.Header = http.Header{}
		for i := 0; i < len(kv); i += 2 {
			r.Header.Add(kv[i], kv[i+1])
		}
		return r
	}
	for _, tc := range []struct {
		name string
		req  contract.Request
		want []string // the backends the request may reach; nil: none (see status)
		path string   // the path the backend gets, when not the request's
		code int
	}{
		{"header always", with(get("http", "app.example.com", "/x"), "X-Canary", "always"), []string{canary}, "", 200},
		{"header never", with(get("http", "app.example.com", "/x"), "x-canary", "never"), []string{main}, "", 200},
		{"other header value: weight", with(get("http", "app.example.com", "/x"), "X-Canary", "maybe"), []string{main, canary}, "", 200},
		{"no header: weight", get("http", "app.example.com", "/"), []string{main, canary}, "", 200},
		{"exact value", with(get("http", "app.example.com", "/api/v1"), "X-Env", "staging"), []string{canary}, "", 200},
		{"value is not always", with(get("http", "app.example.com", "/api"), "X-Env", "always"), []string{main, canary}, "", 200},
		{"cookie always", with(get("http", "app.example.com", "/api"), "Cookie", "a=1; beta=always; c=2"), []string{canary}, "", 200},
		{"cookie name in any case", with(get("http", "app.example.com", "/api"), "Cookie", "BETA=always"), []string{canary}, "", 200},
		{"cookie never", with(get("http", "app.example.com", "/api"), "Cookie", "beta=never"), []string{main}, "", 200},
		{"another cookie's value", with(get("http", "app.example.com", "/api"), "Cookie", "alpha=always; beta=sometimes"), []string{main, canary}, "", 200},
		{"header before cookie", with(get("http", "app.example.com", "/api"), "X-Env", "staging", "Cookie", "beta=never"), []string{canary}, "", 200},
		{"pattern", with(get("http", "app.example.com", "/eu/x"), "X-Region", "eu-west-1"), []string{api}, "", 200},
		{"pattern not matched: weight 0", with(get("http", "app.example.com", "/eu/x"), "X-Region", "us-east-1"), []string{main}, "", 200},
		{"https header, main's rewrite", with(get("https", "secure.example.com", "/shop/cart"), "X-Canary", "always"), []string{canary}, "/cart", 200},
		{"http redirects whatever the header", with(get("http", "secure.example.com", "/shop/cart"), "X-Canary", "always"), nil, "", 308},
		{"canary without main path: not served", get("http", "app.example.com", "/missing"), []string{main, canary}, "", 200},
		{"canary of the main's own Service: main only", get("http", "app.example.com", "/exact"), []string{main}, "", 200},
	} {
		o := contract.OutcomeOf(res, tc.req)
		if o.Status != tc.code || strings.Join(o.Backends, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s: %s %s%s %v: %d to %v, want %d to %v", tc.name, tc.req.Scheme, tc.req.Host, tc.req.Path, tc.req.Header, o.Status, o.Backends, tc.code, tc.want)
			continue
		}
		if tc.path != "" && (len(o.Forwards) == 0 || o.Forwards[0].Path != tc.path) {
			t.Errorf("%s: forwarded as %+v, want path %s", tc.name, o.Forwards, tc.path)
		}
	}
	// The shares: 10 in 100, and 30 in 1000 (canary-weight-total).
	weights := func(path string) map[string]uint32 {
		w := map[string]uint32{}
		for _, b := range contract.Match(res, get("http", "app.example.com", path)).GetBackends() {
			w[b.GetBackend()] = b.GetWeight()
		}
		return w
	}
	if w := weights("/"); w[main] != 90 || w[canary] != 10 {
		t.Errorf("weights of /: %v, want 90 main, 10 canary", w)
	}
	if w := weights("/api"); w[main] != 970 || w[canary] != 30 {
		t.Errorf("weights of /api: %v, want 970 main, 30 canary", w)
	}
	// Without its canaries, the main Ingress's routes are as they were.
	in := load(t, "nginx-canary.yaml")
	var mains []*networkingv1.Ingress
	for _, ing := range in.Ingresses {
		if ing.Annotations[NginxAnnotationPrefix+"canary"] != "true" {
			mains = append(mains, ing)
		}
	}
	in.Ingresses = mains
	alone := Translate(in, goldenOpts)
	for _, p := range []string{"/", "/api", "/eu"} {
		if got := contract.Match(alone, get("http", "app.example.com", p)).GetBackends(); len(got) != 1 || got[0].GetBackend() != main {
			t.Errorf("%s without canaries: %v, want the main Service alone", p, got)
		}
	}
}

// docs/migrating-from-ingress-nginx.md, "server-alias" and "from-to-www-redirect": an alias
// serves the first rule's host's routes; the name without www. redirects (308) to the same
// URL on the www host, and yields to another Ingress's rule for that name.
func TestServerAliasAndFromToWWWAsIngressNginx(t *testing.T) {
	prefix := networkingv1.PathTypePrefix
	aliased := newIngress("aliased", "alias.example.com", map[string]string{NginxAnnotationPrefix + "server-alias": "alias2.example.com"}, false,
		ingressPath("/", prefix, "web"), ingressPath("/api", prefix, "api"))
	www := newIngress("www", "www.brand.example.com", map[string]string{NginxAnnotationPrefix + "from-to-www-redirect": "true"}, false, ingressPath("/", prefix, "web"))
	apex := newIngress("apex", "apex.example.com", map[string]string{NginxAnnotationPrefix + "from-to-www-redirect": "true"}, false, ingressPath("/", prefix, "web"))
	taken := newIngress("taken", "www.apex.example.com", nil, false, ingressPath("/shop", prefix, "api"))
	res := Translate(nginxCase(t, aliased, www, apex, taken), goldenOpts)
	for _, tc := range []struct {
		req      contract.Request
		status   int
		location string
		backend  string
	}{
		{get("http", "alias2.example.com", "/api/x"), 200, "", "app/api:81"},
		{get("http", "alias2.example.com", "/"), 200, "", "app/web:80"},
		{get("http", "brand.example.com", "/a/b?c=d"), 308, "http://www.brand.example.com/a/b?c=d", ""},
		{get("https", "brand.example.com", "/"), 308, "https://www.brand.example.com/", ""},
		{get("http", "www.apex.example.com", "/shop/1"), 200, "", "app/api:81"},
		{get("http", "www.apex.example.com", "/other"), 308, "http://apex.example.com/other", ""},
	} {
		o := contract.OutcomeOf(res, tc.req)
		if o.Status != tc.status || o.Location != tc.location || tc.backend != "" && (len(o.Backends) != 1 || o.Backends[0] != tc.backend) {
			t.Errorf("%s://%s%s: %d %q %v, want %d %q %s", tc.req.Scheme, tc.req.Host, tc.req.Path, o.Status, o.Location, o.Backends, tc.status, tc.location, tc.backend)
		}
	}
}

// docs/design.md, "Cold start": Ingresses without annotations the translator reads share one
// reading of them, which translating every golden case (annotations of every kind) leaves
// as it was; an Ingress with one keeps its own.
func TestPlainIngressesShareOneNginxReading(t *testing.T) {
	prefix := networkingv1.PathTypePrefix
	inputs, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, path := range inputs {
		Translate(load(t, filepath.Base(path)), goldenOpts)
	}
	if want := (nginxIngress{sslRedirect: true}); !reflect.DeepEqual(*plainNginx, want) {
		t.Fatalf("translating changed the shared reading: %+v", *plainNginx)
	}
	plain := newIngress("plain", "a.example.com", nil, false, ingressPath("/", prefix, "web"))
	other := newIngress("other", "b.example.com", map[string]string{"sluice.io/unrelated": "x"}, false, ingressPath("/", prefix, "web"))
	own := newIngress("own", "c.example.com", map[string]string{NginxAnnotationPrefix + "use-regex": "true"}, false, ingressPath("/", prefix, "web"))
	tr := New(goldenOpts)
	in := nginxCase(t, plain, other, own)
	for _, o := range in.objects() {
		tr.Set(o)
	}
	tr.Build()
	for name, shared := range map[string]bool{"plain": true, "other": true, "own": false} {
		lo := tr.local[nsName{"app", name}]
		if lo == nil {
			t.Fatalf("Ingress %s not translated", name)
		}
		if (lo.nginx == plainNginx) != shared {
			t.Errorf("Ingress %s: shares the plain reading %t, want %t", name, lo.nginx == plainNginx, shared)
		}
	}
}

// An Ingress without annotations readNginx reads is not read (docs/design.md, "Cold start"):
// that holds only while reading one gives plainNginx and no finding, whatever else it is
// annotated with; one with an annotation it reads is read.
func TestIngressesWithoutNginxAnnotationsReadAsPlain(t *testing.T) {
	for _, ann := range []map[string]string{nil, {}, {"sluice.io/unrelated": "x", AnnotationIngressClass: "sluice"}} {
		ing := newIngress("plain", "a.example.com", ann, false)
		if readsNginx(ing.Annotations) {
			t.Fatalf("annotations %v: read, though none is readNginx's", ann)
		}
		var findings []string
		got := readNginx(ing, func(field string, _ configv1.FindingSeverity, reason, _ string) {
			findings = append(findings, field+": "+reason)
		})
		if !reflect.DeepEqual(got, *plainNginx) || len(findings) > 0 {
			t.Fatalf("annotations %v: read as %+v with findings %v, not as plainNginx", ann, got, findings)
		}
	}
	for _, k := range []string{AnnotationSSLRedirect, NginxAnnotationPrefix + "use-regex", NginxAnnotationPrefix + "not-one-sluice-knows"} {
		if !readsNginx(map[string]string{"sluice.io/unrelated": "x", k: "false"}) {
			t.Errorf("an Ingress annotated %s is not read", k)
		}
	}
}
