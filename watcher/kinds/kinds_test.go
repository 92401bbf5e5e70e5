package kinds

import (
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-io/sluice/internal/watchstream"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// --kinds and --optional-kinds: a kind is "group/version/resource" ("v1/resource" for the core
// group), optionally "?field=value"; anything else is refused at start, naming the kind.
func TestParseSpecAcceptsGroupVersionResourceAndRefusesTheRest(t *testing.T) {
	cases := []struct {
		in       string
		gvr      schema.GroupVersionResource
		selector string
		err      string // substring; empty: accepted
	}{
		{in: "v1/services", gvr: schema.GroupVersionResource{Version: "v1", Resource: "services"}},
		{in: "networking.k8s.io/v1/ingresses", gvr: schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}},
		{in: " discovery.k8s.io/v1/endpointslices ", gvr: schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}},
		{in: "v1/secrets?type=kubernetes.io/tls", gvr: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, selector: "type=kubernetes.io/tls"},
		{in: "", err: "want group/version/resource"},
		{in: "services", err: `kind "services": want group/version/resource`},
		{in: "a.example/v1/things/status", err: "want group/version/resource"},
		{in: "/v1/services", err: "empty or malformed part"},
		{in: "v1/", err: "empty or malformed part"},
		{in: "v1/ser vices", err: "empty or malformed part"},
		{in: "v1/services,v1/secrets", err: "empty or malformed part"}, // a list given as one kind
		{in: "v1/secrets?type", err: `field selector "type" wants field=value`},
		// Alternatives, each watched on its own: never two an object could match both of.
		{in: "v1/secrets?type=kubernetes.io/tls|type=Opaque", gvr: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, selector: "type=kubernetes.io/tls|type=Opaque"},
		{in: "v1/secrets?type=Opaque|metadata.name=x", err: "all of one field"},
		{in: "v1/secrets?type=Opaque|type=Opaque", err: "distinct values"},
		{in: "v1/secrets?type=Opaque|type!=kubernetes.io/tls", err: "one field=value term"},
		{in: "v1/secrets?type=Opaque,metadata.name=x|type=kubernetes.io/tls", err: "one field=value term"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			s, err := ParseSpec(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseSpec(%q) = %+v, %v; want an error with %q", tc.in, s, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSpec(%q): %v", tc.in, err)
			}
			if s.GVR != tc.gvr || s.FieldSelector != tc.selector {
				t.Errorf("ParseSpec(%q) = %v ?%q, want %v ?%q", tc.in, s.GVR, s.FieldSelector, tc.gvr, tc.selector)
			}
			// The name a kind is reported by (causes, logs) is the name it was given.
			if got := s.String(); got != strings.TrimSpace(tc.in) {
				t.Errorf("String() = %q, want %q", got, strings.TrimSpace(tc.in))
			}
		})
	}
}

// A kind is listed once: twice in one list, in both lists, or again with another field
// selector (one informer per kind) is refused; the lists mark kinds required or optional.
func TestParseSpecsRefusesAKindListedTwice(t *testing.T) {
	cases := []struct {
		name               string
		required, optional []string
		wantRequired       []string
		wantOptional       []string
		err                string
	}{
		{name: "defaults", required: DefaultRequired, wantRequired: DefaultRequired},
		{name: "required and optional", required: []string{"v1/services"}, optional: []string{"widgets.example/v1/widgets"},
			wantRequired: []string{"v1/services"}, wantOptional: []string{"widgets.example/v1/widgets"}},
		{name: "twice in the required list", required: []string{"v1/services", "v1/services"}, err: `kind "v1/services" is listed twice`},
		{name: "twice in the optional list", optional: []string{"widgets.example/v1/widgets", "widgets.example/v1/widgets"}, err: `kind "widgets.example/v1/widgets" is listed twice`},
		{name: "in both lists", required: []string{"v1/services"}, optional: []string{"v1/services"}, err: `kind "v1/services" is listed twice`},
		{name: "again with another selector", required: []string{"v1/secrets?type=kubernetes.io/tls"}, optional: []string{"v1/secrets"}, err: `kind "v1/secrets" is listed twice`},
		{name: "a malformed optional kind", required: []string{"v1/services"}, optional: []string{"widgets"}, err: `kind "widgets": want group/version/resource`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			specs, err := ParseSpecs(tc.required, tc.optional)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseSpecs = %v, %v; want an error with %q", specs, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var req, opt []string
			for _, s := range specs {
				if s.Required {
					req = append(req, s.String())
				} else {
					opt = append(opt, s.String())
				}
			}
			if !slices.Equal(req, tc.wantRequired) || !slices.Equal(opt, tc.wantOptional) {
				t.Errorf("required %v, optional %v; want %v, %v", req, opt, tc.wantRequired, tc.wantOptional)
			}
		})
	}
}

// --gateway-api alone decides the Gateway API kinds: one listed in --kinds or
// --optional-kinds, at any version, is refused; other kinds of that group, and a "gateways"
// resource of another group, are not.
func TestGatewayKindListedAgainIsRefused(t *testing.T) {
	cases := []struct {
		kind    string
		refused bool
	}{
		{"gateway.networking.k8s.io/v1/gatewayclasses", true},
		{"gateway.networking.k8s.io/v1/gateways", true},
		{"gateway.networking.k8s.io/v1beta1/httproutes", true},
		{"gateway.networking.k8s.io/v1/referencegrants", true},
		{"gateway.networking.k8s.io/v1alpha2/referencegrants", true},
		{"gateway.networking.k8s.io/v1/grpcroutes", false},
		{"networking.istio.io/v1/gateways", false},
		{"v1/services", false},
	}
	for _, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			specs, err := ParseSpecs([]string{"v1/secrets"}, []string{tc.kind})
			if err != nil {
				t.Fatal(err)
			}
			err = CheckNoGatewayKinds(specs)
			if tc.refused != (err != nil) {
				t.Fatalf("CheckNoGatewayKinds(%s) = %v, want refused=%v", tc.kind, err, tc.refused)
			}
			if err != nil && !strings.Contains(err.Error(), "--gateway-api") {
				t.Errorf("the refusal does not name the setting that decides: %v", err)
			}
		})
	}
}

// Scenario 2 and 11 (docs/design.md): --gateway-api on adds the four Gateway API kinds and
// Namespaces as required and ListenerSets as optional, auto all as optional, off none; ReferenceGrant falls back to v1beta1;
// the caller's list is not changed.
func TestWithGatewayAddsTheFourKindsAndNamespacesPerMode(t *testing.T) {
	specs, err := ParseSpecs([]string{"v1/services"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	specs = slices.Grow(specs, 8) // room to append in place: WithGateway must copy anyway
	for _, tc := range []struct {
		mode     GatewayAPIMode
		n        int
		required bool
	}{{GatewayAPIOn, 9, true}, {GatewayAPIAuto, 9, false}, {GatewayAPIOff, 1, false}} {
		out := WithGateway(tc.mode, specs)
		if len(out) != tc.n {
			t.Fatalf("%s: %d kinds, want %d", tc.mode, len(out), tc.n)
		}
		for _, s := range out[1:] {
			if s.GVR == ConfigMapsGVR {
				// A BackendTLSPolicy's CA certificates: optional as the policies are.
				if !s.Gateway || s.Required {
					t.Errorf("%s: %+v, want ConfigMaps added, optional", tc.mode, s)
				}
				continue
			}
			if s.GVR == NamespacesGVR {
				if !s.Gateway || s.Required != tc.required {
					t.Errorf("%s: %+v, want Namespaces added with required=%v", tc.mode, s, tc.required)
				}
				continue
			}
			// ListenerSets and BackendTLSPolicies are optional under every mode (an older
			// standard channel lacks them).
			if !s.Gateway || s.Required != (tc.required && s.GVR.Resource != "listenersets" && s.GVR.Resource != "backendtlspolicies") || s.GVR.Group != GatewayGroup || s.GVR.Version != "v1" {
				t.Errorf("%s: %+v, want a v1 Gateway API kind with required=%v", tc.mode, s, tc.required)
			}
			if want := s.GVR.Resource == "referencegrants"; want != slices.Equal(s.Fallback, []string{"v1beta1"}) {
				t.Errorf("%s: %s falls back to %v", tc.mode, s.String(), s.Fallback)
			}
		}
	}
	if len(specs) != 1 {
		t.Errorf("WithGateway changed its argument: %v", specs)
	}
	if full := specs[:cap(specs)][1:2]; full[0].GVR.Resource != "" {
		t.Errorf("WithGateway wrote into its argument's spare capacity: %v", full)
	}
}

// Discovery is asked about each group version once, in a stable order, fallbacks included.
func TestGroupVersionsAreEachAskedOnceFallbacksIncluded(t *testing.T) {
	specs, err := ParseSpecs([]string{"v1/services", "v1/secrets?type=kubernetes.io/tls", "networking.k8s.io/v1/ingresses"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := GroupVersions(WithGateway(GatewayAPIAuto, specs))
	want := []string{"gateway.networking.k8s.io/v1", "gateway.networking.k8s.io/v1beta1", "networking.k8s.io/v1", "v1"}
	if !slices.Equal(got, want) {
		t.Errorf("GroupVersions = %v, want %v", got, want)
	}
}

// Every stream and inventory lists kinds in one order (docs/design.md, "Cold start"): what
// is referred to before what refers to it (classes, Secrets and Namespaces; Services,
// EndpointSlices and grants; Gateways; ListenerSets; routes), then group, version, kind.
func TestSortKindsOrdersReferentsFirst(t *testing.T) {
	k := func(g, v, kind string) *Kind {
		return &Kind{GVK: schema.GroupVersionKind{Group: g, Version: v, Kind: kind}}
	}
	ks := []*Kind{k("networking.k8s.io", "v1", "IngressClass"), k("gateway.networking.k8s.io", "v1beta1", "ReferenceGrant"),
		k("", "v1", "Service"), k("networking.k8s.io", "v1", "Ingress"), k("gateway.networking.k8s.io", "v1", "HTTPRoute"), k("", "v1", "Secret"),
		k("gateway.networking.k8s.io", "v1", "ListenerSet"), k("gateway.networking.k8s.io", "v1", "Gateway"), k("gateway.networking.k8s.io", "v1", "GatewayClass"),
		k("discovery.k8s.io", "v1", "EndpointSlice"), k("", "v1", "Namespace"), k("", "v1", "ConfigMap")}
	SortKinds(ks)
	var got []string
	for _, k := range ks {
		got = append(got, k.GVK.GroupVersion().String()+"/"+k.GVK.Kind)
	}
	want := []string{"v1/ConfigMap", "v1/Namespace", "v1/Secret", "gateway.networking.k8s.io/v1/GatewayClass", "networking.k8s.io/v1/IngressClass",
		"v1/Service", "discovery.k8s.io/v1/EndpointSlice", "gateway.networking.k8s.io/v1beta1/ReferenceGrant",
		"gateway.networking.k8s.io/v1/Gateway", "gateway.networking.k8s.io/v1/ListenerSet",
		"gateway.networking.k8s.io/v1/HTTPRoute", "networking.k8s.io/v1/Ingress"}
	if !slices.Equal(got, want) {
		t.Errorf("SortKinds = %v, want %v", got, want)
	}
}

// objectMeta is metadata with what the store must not hold (managedFields, the
// last-applied annotation) and what it must keep.
func objectMeta(t *testing.T) metav1.ObjectMeta {
	t.Helper()
	return metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "u-1", ResourceVersion: "42",
		Labels:        map[string]string{"app": "web"},
		Annotations:   map[string]string{LastAppliedAnnotation: `{"the":"whole object"}`, "sluice.io/keep": "yes"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}}
}

// docs/design.md, the watch stream: objects are stripped before the store (managedFields, the
// last-applied annotation) and encoded once, protobuf for built-in kinds and JSON for custom
// resources, carrying their kind so that the receiver decodes them as they were; the
// transform is idempotent, as informers require.
func TestTransformStripsAndEncodesOnceWithTheKind(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: objectMeta(t), Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	widget := &unstructured.Unstructured{}
	widget.SetUnstructuredContent(map[string]any{"spec": map[string]any{"size": int64(3)}})
	meta := objectMeta(t)
	widget.SetNamespace(meta.Namespace)
	widget.SetName(meta.Name)
	widget.SetUID(meta.UID)
	widget.SetResourceVersion(meta.ResourceVersion)
	widget.SetAnnotations(meta.Annotations)
	widget.SetManagedFields(meta.ManagedFields)

	cases := []struct {
		name        string
		kind        *Kind
		obj         any
		contentType string
	}{
		{name: "built-in kind: protobuf", kind: &Kind{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Service"}}, obj: svc, contentType: ContentTypeProtobuf},
		{name: "custom resource: JSON", kind: &Kind{GVK: schema.GroupVersionKind{Group: "widgets.example", Version: "v1", Kind: "Widget"}}, obj: widget, contentType: ContentTypeJSON},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			transform := tc.kind.Transform()
			out, err := transform(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			st, ok := out.(*Stored)
			if !ok {
				t.Fatalf("transform returned %T, want *Stored", out)
			}
			if m := metav1.Object(st); m.GetNamespace() != "shop" || m.GetName() != "web" || m.GetUID() != "u-1" || m.GetResourceVersion() != "42" {
				t.Errorf("stored metadata %+v, want shop/web u-1 at 42 (the informer keys on it)", metav1.Object(st))
			}
			if m := metav1.Object(st); len(m.GetAnnotations())+len(m.GetLabels())+len(m.GetManagedFields()) != 0 {
				t.Errorf("the stored metadata holds more than the keys: %+v", m)
			}
			w := st.Wire
			if w.GetContentType() != tc.contentType || w.GetNamespace() != "shop" || w.GetName() != "web" || w.GetUid() != "u-1" || w.GetResourceVersion() != "42" {
				t.Errorf("wire object %s %s/%s %s at %s, want %s shop/web u-1 at 42", w.GetContentType(), w.GetNamespace(), w.GetName(), w.GetUid(), w.GetResourceVersion(), tc.contentType)
			}
			if g := w.GetKind(); g.GetGroup() != tc.kind.GVK.Group || g.GetVersion() != tc.kind.GVK.Version || g.GetKind() != tc.kind.GVK.Kind {
				t.Errorf("wire kind %v, want %v", g, tc.kind.GVK)
			}
			decoded, err := watchstream.Decode(w)
			if err != nil {
				t.Fatalf("the receiver cannot decode it: %v", err)
			}
			if gvk := decoded.GetObjectKind().GroupVersionKind(); gvk != tc.kind.GVK {
				t.Errorf("decoded as %v, want %v", gvk, tc.kind.GVK)
			}
			m, ok := decoded.(metav1.Object)
			if !ok {
				t.Fatalf("decoded %T has no metadata", decoded)
			}
			if len(m.GetManagedFields()) != 0 {
				t.Errorf("managedFields reached the wire: %v", m.GetManagedFields())
			}
			if a := m.GetAnnotations(); a[LastAppliedAnnotation] != "" || a["sluice.io/keep"] != "yes" {
				t.Errorf("annotations on the wire %v, want only sluice.io/keep", a)
			}
			if again, err := transform(out); err != nil || again != out {
				t.Errorf("transform of a stored object = %T (same: %v), %v; want the same object back", again, again == out, err)
			}
		})
	}
}

// An informer hands the transform only API objects; anything else is an error, not a panic.
// A Namespace is carried with its name and labels only (what a Gateway listener's selector
// reads): its spec, status and annotations never reach the store or the wire.
func TestTransformKeepsOnlyANamespacesLabels(t *testing.T) {
	k := &Kind{Spec: Spec{GVR: NamespacesGVR}, GVK: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}}
	ns := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", UID: "u-ns", ResourceVersion: "7", Labels: map[string]string{"team": "shop"},
			Annotations: map[string]string{"owner": "someone"}, Finalizers: []string{"example.com/f"}},
		Spec:   corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	}
	st, decoded := transformToWire(t, k, ns)
	got := decoded.(*corev1.Namespace)
	want := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", UID: "u-ns", ResourceVersion: "7", Labels: map[string]string{"team": "shop"}}}
	got.TypeMeta = metav1.TypeMeta{}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("the wire carries %+v, want %+v", got, want)
	}
	if m := metav1.Object(st); m.GetName() != "shop" || m.GetUID() != "u-ns" || m.GetResourceVersion() != "7" {
		t.Errorf("stored metadata %+v, want shop u-ns at 7", metav1.Object(st))
	}
}

// docs/design.md, "only the Secret types the translator needs are read": of a Secret of
// another type than kubernetes.io/tls (an Opaque one), only its certificates are kept, never
// a key or anything else it holds; a kubernetes.io/tls Secret is kept whole.
func TestTransformKeepsOnlyTheCertificatesOfAnOpaqueSecret(t *testing.T) {
	k := &Kind{Spec: Spec{GVR: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}}, GVK: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}}
	data := map[string][]byte{"ca.crt": []byte("CA"), "tls.crt": []byte("CRT"), "tls.key": []byte("KEY"), "password": []byte("hunter2")}
	for _, c := range []struct {
		typ  corev1.SecretType
		want map[string][]byte
	}{
		{corev1.SecretTypeOpaque, map[string][]byte{"ca.crt": []byte("CA"), "tls.crt": []byte("CRT")}},
		{corev1.SecretTypeTLS, data},
	} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "app", UID: "u", ResourceVersion: "3",
			Annotations: map[string]string{"note": "x"}}, Type: c.typ, Data: data}
		_, decoded := transformToWire(t, k, s)
		got := decoded.(*corev1.Secret)
		if got.Type != c.typ || !equality.Semantic.DeepEqual(got.Data, c.want) || got.Name != "s" || got.ResourceVersion != "3" {
			t.Errorf("%s: the wire carries %s %s/%s at %s with %v, want %v", c.typ, got.Type, got.Namespace, got.Name, got.ResourceVersion, keysOf(got.Data), keysOf(c.want))
		}
	}
}

// A ConfigMap is read for a BackendTLSPolicy's CA certificates alone: of one with ca.crt only
// that key is kept; one without is withheld (held by the informer, never stored or streamed).
func TestTransformKeepsOnlyAConfigMapsCA(t *testing.T) {
	k := &Kind{Spec: Spec{GVR: ConfigMapsGVR}, GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}}
	for _, c := range []struct {
		data     map[string]string
		want     map[string]string
		withheld bool
	}{
		{map[string]string{"ca.crt": "CA", "app.properties": "x=1"}, map[string]string{"ca.crt": "CA"}, false},
		{map[string]string{"app.properties": "x=1"}, nil, true},
	} {
		st, decoded := transformToWire(t, k, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "app", ResourceVersion: "2"}, Data: c.data})
		if got := decoded.(*corev1.ConfigMap).Data; st.Withheld != c.withheld || !equality.Semantic.DeepEqual(got, c.want) {
			t.Errorf("%v: withheld %t with %v, want %t with %v", c.data, st.Withheld, got, c.withheld, c.want)
		}
	}
}

func keysOf(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestTransformRefusesWhatIsNotAnObject(t *testing.T) {
	k := &Kind{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Service"}}
	for _, obj := range []any{"a string", &metav1.Status{}} {
		if out, err := k.Transform()(obj); err == nil {
			t.Errorf("transform(%T) = %v, want an error", obj, out)
		}
	}
}

// transformToWire runs k's informer transform on obj and decodes the wire form it stored, as
// the translator will.
func transformToWire(t *testing.T, k *Kind, obj runtime.Object) (*Stored, runtime.Object) {
	t.Helper()
	out, err := k.Transform()(obj)
	if err != nil {
		t.Fatal(err)
	}
	st := out.(*Stored)
	decoded, err := watchstream.Decode(st.Wire)
	if err != nil {
		t.Fatal(err)
	}
	return st, decoded
}

// The watcher keeps each object once (docs/design.md, "Cold start"): the informers' key
// functions read a Stored object's metadata as it is, from its wire form, without building
// (and dropping) a copy of it on every call.
func TestStoredIsItsOwnMetadata(t *testing.T) {
	st := &Stored{Wire: &watchv1.Object{Namespace: "shop", Name: "web", Uid: "u-1", ResourceVersion: "42"}}
	m, err := meta.Accessor(st)
	if err != nil {
		t.Fatal(err)
	}
	if m != metav1.Object(st) {
		t.Fatalf("meta.Accessor gave %T, want the Stored object itself", m)
	}
	if key, err := cache.MetaNamespaceKeyFunc(st); err != nil || key != "shop/web" {
		t.Fatalf("informer key %q, %v; want shop/web", key, err)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		m, _ := meta.Accessor(st)
		_ = m.GetResourceVersion()
	}); allocs != 0 {
		t.Fatalf("meta.Accessor allocates %v times per call, want none", allocs)
	}
	// A Stored object is never changed: a setter does nothing.
	st.SetResourceVersion("43")
	if st.GetResourceVersion() != "42" || st.Wire.GetResourceVersion() != "42" {
		t.Fatalf("a setter changed a stored object: resourceVersion %s", st.GetResourceVersion())
	}
}
