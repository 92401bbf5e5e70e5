package smoke_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"

	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/sluice-io/sluice/internal/harness/testenv"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	"github.com/sluice-io/sluice/pusher/caddy"
	"github.com/sluice-io/sluice/translator/translate"
)

// recipeResources maps the kinds the guides' recipes use to their resources.
var recipeResources = map[string]schema.GroupVersionResource{
	"Ingress":      {Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"},
	"IngressClass": {Group: "networking.k8s.io", Version: "v1", Resource: "ingressclasses"},
	"Service":      {Version: "v1", Resource: "services"},
	"GatewayClass": {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"},
	"Gateway":      {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"},
	"HTTPRoute":    {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"},
}

// neighbourReasons are the findings a recipe shown alone may raise because its neighbours
// (the Services, Secrets and main Ingress it names) are not part of it. Any other finding
// means the recipe asks for something Sluice does not read as the guide says.
// The IngressClass sluice is the deployment's (deploy/, the Helm chart), not a recipe's.
var neighbourReasons = map[string]bool{"ServiceNotFound": true, "BackendNotFound": true, "SecretNotFound": true, "CanaryNotServed": true,
	"IngressClassNotFound": true}

// Every YAML recipe of the user guides is accepted by the real apiserver as written (so its
// validation has its say: a recipe it refuses is a defect of the guide), the objects as
// the apiserver stores them translate without a finding other than those of the neighbours
// the recipe leaves out (docs/design.md, "Bad input"), and a real Caddy with Sluice's module
// takes the config they make, refusing nothing of it.
func TestGuideRecipesAreAcceptedByTheAPIServerAndTranslate(t *testing.T) {
	c := testenv.SharedCluster(t)
	testenv.InstallGatewayAPICRDs(t, c)
	dyn := c.Dynamic()
	proxy, err := testenv.StartCaddy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Kill)
	module, err := caddy.NewModule(caddy.Config{Admin: proxy.AdminURL, Render: caddy.RenderOptions{
		HTTPListen: fmt.Sprintf("127.0.0.1:%d", proxy.HTTPPort), HTTPSListen: fmt.Sprintf("127.0.0.1:%d", proxy.HTTPSPort)}})
	if err != nil {
		t.Fatal(err)
	}
	version := uint64(0)
	block := regexp.MustCompile("(?s)```yaml\n(.*?)```")
	n := 0
	for _, guide := range []string{"migrating-from-ingress-nginx.md", "translation.md", "operations.md"} {
		doc := []byte(testenv.Doc(t, guide))
		for _, m := range block.FindAllSubmatchIndex(doc, -1) {
			line := 1 + bytes.Count(doc[:m[0]], []byte("\n"))
			recipe := doc[m[2]:m[3]]
			if !bytes.Contains(recipe, []byte("apiVersion:")) {
				continue // Helm values, tested by deploy's render tests
			}
			n++
			t.Run(fmt.Sprintf("%s:%d", guide, line), func(t *testing.T) {
				ns := c.Namespace(t)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				var stored [][]byte
				dec := k8syaml.NewYAMLOrJSONDecoder(bytes.NewReader(recipe), 4096)
				for {
					var u unstructured.Unstructured
					if err := dec.Decode(&u.Object); err != nil {
						if err.Error() == "EOF" {
							break
						}
						t.Fatalf("docs/%s:%d does not decode: %v", guide, line, err)
					}
					if len(u.Object) == 0 {
						continue
					}
					gvr, ok := recipeResources[u.GetKind()]
					if !ok {
						t.Fatalf("docs/%s:%d: kind %s is not one the recipes test knows", guide, line, u.GetKind())
					}
					res := dyn.Resource(gvr)
					var got *unstructured.Unstructured
					var err error
					if u.GetKind() == "GatewayClass" || u.GetKind() == "IngressClass" {
						got, err = res.Create(ctx, &u, metav1.CreateOptions{})
						if errors.IsAlreadyExists(err) {
							got, err = res.Get(ctx, u.GetName(), metav1.GetOptions{})
						}
					} else {
						u.SetNamespace(ns)
						got, err = res.Namespace(ns).Create(ctx, &u, metav1.CreateOptions{})
					}
					if err != nil {
						t.Fatalf("docs/%s:%d: the apiserver refuses %s %s: %v", guide, line, u.GetKind(), u.GetName(), err)
					}
					b, err := yaml.Marshal(got.Object)
					if err != nil {
						t.Fatal(err)
					}
					stored = append(stored, b)
				}
				in, skipped, err := translate.LoadManifests(guide, bytes.Join(stored, []byte("---\n")))
				if err != nil || len(skipped) > 0 {
					t.Fatalf("docs/%s:%d: the stored objects do not load: %v (skipped %v)", guide, line, err, skipped)
				}
				res := translate.Translate(in, translate.Options{IngressClass: "sluice", ControllerName: "sluice.io/ingress-controller",
					GatewayControllerName: "sluice.io/gateway-controller", Now: time.Now()})
				for _, f := range res.GetFindings() {
					if !neighbourReasons[f.GetReason()] {
						t.Errorf("docs/%s:%d: %s %s/%s %s: %s (%s)", guide, line, f.GetObject().GetKind(), f.GetObject().GetNamespace(), f.GetObject().GetName(), f.GetField(), f.GetCause(), f.GetReason())
					}
				}
				version++
				if err := module.Apply(ctx, &configv1.Config{Epoch: "recipes", Version: version, Hash: translate.Hash(res), Resources: res}); err != nil {
					t.Errorf("docs/%s:%d: Caddy's module refuses the config: %v", guide, line, err)
				}
			})
		}
	}
	if n < 5 {
		t.Fatalf("found %d YAML recipes in the guides; the pattern no longer matches them", n)
	}
}

// goldenResources maps the kinds of the translator's golden cases to their resources.
var goldenResources = map[string]schema.GroupVersionResource{
	"Secret":           {Version: "v1", Resource: "secrets"},
	"ConfigMap":        {Version: "v1", Resource: "configmaps"},
	"Namespace":        {Version: "v1", Resource: "namespaces"},
	"EndpointSlice":    {Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"},
	"ReferenceGrant":   {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "referencegrants"},
	"ListenerSet":      {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "listenersets"},
	"BackendTLSPolicy": {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "backendtlspolicies"},
}

// refusedMark starts a comment in a golden case's document whose object the apiserver refuses
// on purpose: it shows the translator handling what validation would stop (an older CRD, an
// experimental field), and the comment says what.
const refusedMark = "# refused by the apiserver:"

// docs/translation.md's examples are the translator's golden cases (each rule names its
// golden): every object of every case is one the real apiserver accepts as written, checked
// by a server-side dry run (so its validation, the Gateway API CRDs' schemas and rules
// included, has its say without the cases' objects ever meeting), in the namespaces the
// cases name; a document marked refusedMark must be refused, so that the mark cannot go
// stale. What the goldens translate is replayed through both Caddy targets by pusher's
// TestCaddyRoutesEveryGoldenCaseLikeTheReference.
func TestGoldenCasesAreAcceptedByTheAPIServer(t *testing.T) {
	c := testenv.SharedCluster(t)
	testenv.InstallGatewayAPICRDs(t, c)
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cases, err := filepath.Glob(filepath.Join(root, "translator", "translate", "testdata", "*.yaml"))
	if err != nil || len(cases) < 20 {
		t.Fatalf("golden cases: %v (%d found)", err, len(cases))
	}
	dyn := c.Dynamic()
	ctx := context.Background()
	namespaces := map[string]bool{}
	separator := regexp.MustCompile(`(?m)^---\s*$`)
	accepted, refused := 0, 0
	for _, path := range cases {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range separator.Split(string(data), -1) {
			var u unstructured.Unstructured
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				t.Fatalf("%s: document %d does not decode: %v", filepath.Base(path), i+1, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			what := fmt.Sprintf("%s: document %d, %s %s/%s", filepath.Base(path), i+1, u.GetKind(), u.GetNamespace(), u.GetName())
			gvr, ok := recipeResources[u.GetKind()]
			if !ok {
				if gvr, ok = goldenResources[u.GetKind()]; !ok {
					t.Fatalf("%s: kind %s is not one the test knows", what, u.GetKind())
				}
			}
			gvr.Version = u.GroupVersionKind().Version // a ReferenceGrant may be v1beta1
			var ri dynamic.ResourceInterface = dyn.Resource(gvr)
			if ns := u.GetNamespace(); ns != "" {
				if !namespaces[ns] {
					_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
					if err != nil && !errors.IsAlreadyExists(err) {
						t.Fatal(err)
					}
					namespaces[ns] = true
				}
				ri = dyn.Resource(gvr).Namespace(ns)
			}
			_, err := ri.Create(ctx, &u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if errors.IsAlreadyExists(err) {
				err = nil // a Namespace of the case that the test created: valid
			}
			switch marked := strings.Contains(doc, refusedMark); {
			case marked && err == nil:
				t.Errorf("%s: marked refused by the apiserver, but it is accepted: remove the mark", what)
			case marked:
				refused++
			case err != nil:
				t.Errorf("%s: the apiserver refuses it: %v", what, err)
			default:
				accepted++
			}
		}
	}
	t.Logf("%d objects of %d golden cases accepted, %d refused as marked", accepted, len(cases), refused)
}
