package e2e_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-io/sluice/internal/harness/stack"
)

// No single-message ceiling on the config stream: with the translator and the pusher at the
// smallest --max-message-size (64 KiB) and a cluster whose complete state is several times
// that, a new pusher gets the complete state in chunks, takes it whole, and Caddy serves
// every route, those of the last chunk included; sluicectl config --watch follows the same
// stream.
func TestCompleteStateLargerThanTheMessageLimitIsServed(t *testing.T) {
	const limit = "65536"
	const n = 300
	w := newWorld(t, false, stack.Config{})
	pt := networkingv1.PathTypePrefix
	for i := range n {
		ing := ingress(fmt.Sprintf("r%d", i), w.host(i), w.svcOf(i))
		rule := &ing.Spec.Rules[0].HTTP.Paths
		for j := range 10 { // about 1 KiB per Ingress
			p := (*rule)[0]
			p.Path, p.PathType = fmt.Sprintf("/%s-%d", strings.Repeat("long-path-segment-", 3), j), &pt
			*rule = append(*rule, p)
		}
		if _, err := w.c.Client.NetworkingV1().Ingresses(w.ns).Create(context.Background(), ing, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w.start(stack.Config{TranslatorArgs: []string{"--max-message-size=" + limit}, PusherArgs: []string{"--max-message-size=" + limit}})
	w.waitServed(0, n, 2*time.Minute)
	w.waitConverged(time.Minute)

	m := regexp.MustCompile(`complete state received in chunks: .*chunks=(\d+)`).FindStringSubmatch(w.st.Pusher.Logs())
	if m == nil {
		t.Fatalf("the pusher's log does not say it received the complete state in chunks:\n%s", w.st.Pusher.LogTail(40))
	}
	if chunks, _ := strconv.Atoi(m[1]); chunks < 4 {
		t.Fatalf("the complete state came in %d chunks, want at least 4 (it is several times the limit)", chunks)
	}

	out, err := runCtl(t, "config", "--addr", w.st.TranslatorAddr, "--watch", "--count", "1")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`version \d+ complete in \d+ chunks, hash [0-9a-f]{12}, \d+ bytes: 300 virtual hosts`).MatchString(out) {
		t.Fatalf("sluicectl config --watch did not follow the chunked state:\n%s", out)
	}
}
