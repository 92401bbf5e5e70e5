package watchstream

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// docs/operations.md, "Security model": what the operator's Watch carries of a Secret. The certificate stays, the key
// and any other data are emptied, and kubectl's last-applied annotation (the whole Secret,
// key included) is dropped; identity and resourceVersion (the inventory) are unchanged, and
// other kinds pass through untouched.
func TestRedactRemovesPrivateMaterialFromSecrets(t *testing.T) {
	sec := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tls", ResourceVersion: "7",
			Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: `{"data":{"tls.key":"c2VjcmV0"}}`, "keep": "me"}},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: []byte("CERT"), corev1.TLSPrivateKeyKey: []byte("KEY"), "ca.crt": []byte("CA"), "extra": []byte("X")}}
	raw, err := json.Marshal(sec)
	if err != nil {
		t.Fatal(err)
	}
	kind := &watchv1.GroupVersionKind{Version: "v1", Kind: "Secret"}
	in := &watchv1.Object{Kind: kind, Namespace: "ns", Name: "tls", Uid: "u", ResourceVersion: "7", ContentType: ContentTypeJSON, Raw: raw}
	out, err := Redact(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(in.GetRaw()) != string(raw) {
		t.Fatal("Redact changed its input, which other streams share")
	}
	if KeyOf(out) != KeyOf(in) || out.GetResourceVersion() != "7" || out.GetUid() != "u" {
		t.Fatalf("identity changed: %v", out)
	}
	obj, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*corev1.Secret)
	want := map[string]string{corev1.TLSCertKey: "CERT", "ca.crt": "CA", corev1.TLSPrivateKeyKey: "", "extra": ""}
	for k, v := range want {
		if string(got.Data[k]) != v {
			t.Errorf("data[%s] = %q, want %q", k, got.Data[k], v)
		}
	}
	if _, ok := got.Annotations[corev1.LastAppliedConfigAnnotation]; ok || got.Annotations["keep"] != "me" {
		t.Errorf("annotations %v: want last-applied dropped, the rest kept", got.Annotations)
	}
	svc := &watchv1.Object{Kind: &watchv1.GroupVersionKind{Version: "v1", Kind: "Service"}, Raw: []byte("anything")}
	if o, err := Redact(svc); err != nil || o != svc {
		t.Fatalf("a Service was rewritten: %v %v", o, err)
	}
}
