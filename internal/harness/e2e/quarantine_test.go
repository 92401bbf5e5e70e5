package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-io/sluice/internal/harness/stack"
	"github.com/sluice-io/sluice/internal/harness/testenv"
	"github.com/sluice-io/sluice/translator/translate"
)

// refusedPath is refused by the test-only rule of the caddy-sluicetest build: a rule the
// translator does not know, so the data plane rejects a config the translator built.
const refusedPath = "/refused-by-test"

// A data plane's rejection never freezes the fleet: the Caddy module refuses a route the
// translator accepted, the pusher's NACK names its Ingress, and the translator leaves that
// Ingress out (a Warning Event, the metric) and publishes a version without it at once, so
// the routes served before still are and the next change is served. Editing the refused
// Ingress tries it again.
func TestRejectedIngressIsQuarantinedAndTheNextChangeServed(t *testing.T) {
	w := newWorld(t, true, stack.Config{CaddyTool: "caddy-sluicetest"})
	ctx := context.Background()
	ings := w.c.Client.NetworkingV1().Ingresses(w.ns)
	w.createRoutes(0, 1)
	w.waitServed(0, 1, time.Minute)

	host := "refused." + w.ns + ".example.com"
	bad := ingress("refused", host, "alpha")
	bad.Spec.Rules[0].HTTP.Paths[0].Path = refusedPath
	if _, err := ings.Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := w.waitEvent("refused", corev1.EventTypeWarning, translate.ReasonRejectedByDataPlane, time.Minute)
	if !strings.Contains(ev.Message, "rejected by the data plane") || !strings.Contains(ev.Message, "test-only rule") {
		t.Fatalf("the Warning Event says %q, want the data plane's rejection", ev.Message)
	}
	t.Logf("event: %s %s %q", ev.Type, ev.Reason, ev.Message)
	if n := metric(w.st.TranslatorHTTP, "sluice_translator_quarantined_objects"); n != 1 {
		t.Fatalf("sluice_translator_quarantined_objects = %v, want 1", n)
	}

	// The next change is served, and so is what was served before; the refused route is not.
	start := time.Now()
	w.createRoutes(1, 1)
	w.waitServed(1, 1, time.Minute)
	t.Logf("a new Ingress served %v after it was created, with the refused one left out", time.Since(start).Round(time.Millisecond))
	w.waitServed(0, 1, time.Second)
	if got := w.answer(host, refusedPath); got != "404" {
		t.Fatalf("the quarantined route answered %s, want 404", got)
	}
	out, err := runCtl(t, "config", "--addr", w.st.TranslatorAddr)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "ERROR Ingress "+w.ns+"/refused : rejected by the data plane: ") {
		t.Fatalf("sluicectl config does not show the quarantine:\n%s", out)
	}

	// Edited, the Ingress is tried again: with a path the data plane takes, it is served.
	testenv.Eventually(t, time.Minute, "the refused Ingress to be edited", func() (bool, error) {
		cur, err := ings.Get(ctx, "refused", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cur.Spec.Rules[0].HTTP.Paths[0].Path = "/fixed"
		_, err = ings.Update(ctx, cur, metav1.UpdateOptions{})
		return err == nil, err
	})
	testenv.Eventually(t, time.Minute, "the edited Ingress to be served by alpha", func() (bool, error) {
		got := w.answer(host, "/fixed")
		return got == "alpha", fmt.Errorf("it answers %s", got)
	})
	w.waitConverged(time.Minute) // exactly what the cluster says, nothing left out
	if n := metric(w.st.TranslatorHTTP, "sluice_translator_quarantined_objects"); n != 0 {
		t.Fatalf("sluice_translator_quarantined_objects = %v after the edit, want 0", n)
	}
}
