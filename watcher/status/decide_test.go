package status

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/sluice-io/sluice/internal/contract"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// ipsOf is a load-balancer list's IPs, in order.
func ipsOf(lb []*watchv1.LoadBalancerIngress) []string {
	var out []string
	for _, a := range lb {
		out = append(out, a.GetIp())
	}
	return out
}

// lbOf is a load-balancer list of IPs, in the order given.
func lbOf(ips ...string) []*watchv1.LoadBalancerIngress {
	var out []*watchv1.LoadBalancerIngress
	for _, ip := range ips {
		out = append(out, &watchv1.LoadBalancerIngress{Ip: ip})
	}
	return out
}

// withLB is the view of an Ingress showing the addresses lb, as it reads back after a write.
func withLB(ing *ingressView, lb []*watchv1.LoadBalancerIngress) *ingressView {
	c := *ing
	c.lb = nil
	for _, a := range lb {
		c.lb = append(c.lb, networkingv1.IngressLoadBalancerIngress{IP: a.GetIp(), Hostname: a.GetHostname()})
	}
	return &c
}

// viewOf is the writer's view of ing, nil for none.
func viewOf(ing *networkingv1.Ingress) *ingressView {
	if ing == nil {
		return nil
	}
	return statusView(ing)
}

// The Ingress half of the status writer's decision table (docs/design.md, "Who may
// do what"; docs/operations.md, "Status write-back and leader election"): a report is acted
// on only by a translator that may report for the Ingress's class, only when its uid is the
// Ingress's, the smallest allowed source decides; it sets the addresses it manages, and
// nothing is written when the Ingress already shows them; addresses a source let go of are
// taken back only while the Ingress shows exactly those; findings become Events once each,
// and their end is announced once. The decision uses no clock (Events are stamped by
// client-go's recorder), so there is none to inject.
func TestDecideIngressStatus(t *testing.T) {
	const controller, nginx = "sluice.io/ingress-controller", "k8s.io/ingress-nginx"
	classes := map[string]contract.IngressClassInfo{"sluice": {Controller: controller}, "sluice-internal": {Controller: controller}, "nginx": {Controller: nginx}}
	nginxDefault := map[string]contract.IngressClassInfo{"sluice": {Controller: controller}, "nginx": {Controller: nginx, Default: true}}
	unchecked := Origin{}
	sluiceTranslator := Origin{Source: "spiffe://cluster.local/sluice/translator/sluice", Class: "sluice", Checked: true}
	nginxTranslator := Origin{Source: "spiffe://cluster.local/sluice/translator/nginx", Class: "nginx", Checked: true}
	of := func(class string, ing *networkingv1.Ingress) *networkingv1.Ingress {
		ing.Spec.IngressClassName = &class
		return ing
	}
	annotated := func(class string, ing *networkingv1.Ingress) *networkingv1.Ingress {
		ing.Annotations = map[string]string{contract.AnnotationIngressClass: class}
		return ing
	}
	unmanaged := func(st *watchv1.ObjectStatus, findings ...*watchv1.StatusFinding) *watchv1.ObjectStatus {
		st.ManageAddresses, st.Findings = false, findings
		return st
	}
	withFindings := func(st *watchv1.ObjectStatus, findings ...*watchv1.StatusFinding) *watchv1.ObjectStatus {
		st.Findings = findings
		return st
	}
	noService := &watchv1.StatusFinding{Reason: "ServiceNotFound", Field: "spec.rules[0].http.paths[0].backend", Message: `service "web" not found`, Warning: true}
	noTLS := &watchv1.StatusFinding{Reason: "TLSIgnored", Message: "tls is served by the default certificate"}
	// told is what an Ingress of uid was told after a report of findings.
	told := func(uid string, findings ...*watchv1.StatusFinding) announced {
		a, _ := announce(announced{}, ingressRef(statusView(ingress("a", uid, "1"))), findings)
		return a
	}
	resolved := "Normal FindingsResolved: every finding was resolved; the Ingress is served as written"

	cases := []struct {
		name     string
		obj      *networkingv1.Ingress // nil: absent
		reports  map[string]sourceReport
		classes  map[string]contract.IngressClassInfo
		released []*watchv1.LoadBalancerIngress
		told     announced

		wantWrite  bool
		wantLB     []string // the addresses written (none: the field is removed)
		wantWhy    string   // when nothing is written
		wantFrom   string   // the source whose report decides; empty: none
		wantEvents []string // "type reason: message"
		wantTold   bool     // what the Ingress was told is replaced
		wantForget bool     // the released addresses are forgotten
	}{{
		name: "ReportSetsTheAddresses", obj: ingress("a", "ua", "1"),
		reports:   map[string]sourceReport{"s": {unchecked, desired("a", "ua", "10.0.0.1")}},
		wantWrite: true, wantLB: []string{"10.0.0.1"}, wantFrom: "s", wantTold: true, wantForget: true,
	}, {
		name: "NoWriteWhenTheIngressShowsTheAddressesInAnyOrder", obj: ingress("a", "ua", "1", "10.0.0.2", "10.0.0.1"),
		reports: map[string]sourceReport{"s": {unchecked, desired("a", "ua", "10.0.0.1", "10.0.0.2")}},
		wantWhy: whyEqual, wantFrom: "s", wantTold: true, wantForget: true,
	}, {
		name: "ReportReplacesOtherAddresses", obj: ingress("a", "ua", "1", "10.0.0.1"),
		reports:   map[string]sourceReport{"s": {unchecked, desired("a", "ua", "10.0.0.2")}},
		wantWrite: true, wantLB: []string{"10.0.0.2"}, wantFrom: "s", wantTold: true, wantForget: true,
	}, {
		name: "ReportOfNoAddressesRemovesThem", obj: ingress("a", "ua", "1", "10.0.0.1"),
		reports:   map[string]sourceReport{"s": {unchecked, desired("a", "ua")}},
		wantWrite: true, wantFrom: "s", wantTold: true, wantForget: true,
	}, {
		name: "AddressesLeftAloneWhenTheReportDoesNotManageThem", obj: ingress("a", "ua", "1", "192.0.2.7"),
		reports: map[string]sourceReport{"s": {unchecked, unmanaged(desired("a", "ua", "10.0.0.1"))}},
		wantWhy: whyUnmanaged, wantFrom: "s", wantTold: true, wantForget: true,
	}, {
		name:    "AbsentIngressIsNotWritten",
		reports: map[string]sourceReport{"s": {unchecked, withFindings(desired("a", "ua", "10.0.0.1"), noService)}},
		wantWhy: whyAbsent, wantFrom: "s",
	}, {
		name: "ReportAboutAnEarlierObjectWaits", obj: ingress("a", "ua-new", "1"),
		reports: map[string]sourceReport{"s": {unchecked, withFindings(desired("a", "ua", "10.0.0.1"), noService)}},
		wantWhy: whyUIDMismatch, wantFrom: "s", wantForget: true,
	}, {
		name: "SmallestSourceNameDecides", obj: ingress("a", "ua", "1"),
		reports:   map[string]sourceReport{"b": {unchecked, desired("a", "ua", "10.0.0.2")}, "a": {unchecked, desired("a", "ua", "10.0.0.1")}},
		wantWrite: true, wantLB: []string{"10.0.0.1"}, wantFrom: "a", wantTold: true, wantForget: true,
	}, {
		name: "ReportOfAnotherClassRefused", obj: of("nginx", ingress("a", "ua", "1")), classes: classes,
		reports: map[string]sourceReport{"s": {sluiceTranslator, withFindings(desired("a", "ua", "10.0.0.66"), noService)}},
		wantWhy: whyNotItsClass,
	}, {
		name: "UncheckedReportActsOnAnyClass", obj: of("nginx", ingress("a", "ua", "1")), classes: classes,
		reports:   map[string]sourceReport{"s": {unchecked, desired("a", "ua", "10.0.0.1")}},
		wantWrite: true, wantLB: []string{"10.0.0.1"}, wantFrom: "s", wantTold: true, wantForget: true,
	}, {
		name: "ClassOfTheSameControllerMayBeReported", obj: of("sluice-internal", ingress("a", "ua", "1")), classes: classes,
		reports:   map[string]sourceReport{"s": {sluiceTranslator, desired("a", "ua", "10.0.0.1")}},
		wantWrite: true, wantLB: []string{"10.0.0.1"}, wantFrom: "s", wantTold: true, wantForget: true,
	}, {
		name: "LegacyAnnotationOfAnotherClassRefused", obj: annotated("nginx", ingress("a", "ua", "1")), classes: classes,
		reports: map[string]sourceReport{"s": {sluiceTranslator, desired("a", "ua", "10.0.0.66")}},
		wantWhy: whyNotItsClass,
	}, {
		name: "IngressWithoutAClassRefusedWhileAnotherControllersClassIsTheDefault", obj: ingress("a", "ua", "1"), classes: nginxDefault,
		reports: map[string]sourceReport{"s": {sluiceTranslator, desired("a", "ua", "10.0.0.66")}},
		wantWhy: whyNotItsClass,
	}, {
		name: "RefusedSmallerSourceDoesNotHideAnAllowedOne", obj: of("sluice", ingress("a", "ua", "1")), classes: classes,
		reports:   map[string]sourceReport{"a": {nginxTranslator, desired("a", "ua", "10.0.0.66")}, "b": {sluiceTranslator, desired("a", "ua", "10.0.0.1")}},
		wantWrite: true, wantLB: []string{"10.0.0.1"}, wantFrom: "b", wantTold: true, wantForget: true,
	}, {
		name: "UnreportedIngressUntouched", obj: ingress("a", "ua", "1", "192.0.2.7"),
		wantWhy: whyNoReport,
	}, {
		name: "ReleasedAddressesTakenBack", obj: ingress("a", "ua", "1", "10.0.0.1"), released: lbOf("10.0.0.1"),
		wantWrite: true,
	}, {
		name: "ReleasedAddressesReplacedByOthersLeftAlone", obj: ingress("a", "ua", "1", "192.0.2.7"), released: lbOf("10.0.0.1"),
		wantWhy: whyOthers,
	}, {
		name: "ReleasedAddressesAlreadyGoneForgotten", obj: ingress("a", "ua", "1"), released: lbOf("10.0.0.1"),
		wantWhy: whyEqual, wantForget: true,
	}, {
		name: "IngressThatLeftTheClassLosesTheReleasedAddresses", obj: of("nginx", ingress("a", "ua", "1", "10.0.0.1")), classes: classes,
		reports:  map[string]sourceReport{"s2": {sluiceTranslator, desired("a", "ua", "10.0.0.1")}},
		released: lbOf("10.0.0.1"), wantWrite: true,
	}, {
		name: "ReportThatDecidesEndsTheWatchOnReleasedAddresses", obj: ingress("a", "ua", "1", "10.0.0.1"), released: lbOf("10.0.0.1"),
		reports: map[string]sourceReport{"s2": {unchecked, desired("a", "ua", "10.0.0.1")}},
		wantWhy: whyEqual, wantFrom: "s2", wantTold: true, wantForget: true,
	}, {
		name: "FindingBecomesAWarningEventNamingTheField", obj: ingress("a", "ua", "1"),
		reports: map[string]sourceReport{"s": {unchecked, unmanaged(desired("a", "ua"), noService)}},
		wantWhy: whyUnmanaged, wantFrom: "s", wantTold: true, wantForget: true,
		wantEvents: []string{`Warning ServiceNotFound: spec.rules[0].http.paths[0].backend: service "web" not found`},
	}, {
		name: "FindingThatIsNoWarningBecomesANormalEvent", obj: ingress("a", "ua", "1"),
		reports: map[string]sourceReport{"s": {unchecked, unmanaged(desired("a", "ua"), noTLS)}},
		wantWhy: whyUnmanaged, wantFrom: "s", wantTold: true, wantForget: true,
		wantEvents: []string{"Normal TLSIgnored: tls is served by the default certificate"},
	}, {
		name: "FindingsAnnouncedWhileTheAddressesAreWritten", obj: ingress("a", "ua", "1"),
		reports:   map[string]sourceReport{"s": {unchecked, withFindings(desired("a", "ua", "10.0.0.1"), noService)}},
		wantWrite: true, wantLB: []string{"10.0.0.1"}, wantFrom: "s", wantTold: true, wantForget: true,
		wantEvents: []string{`Warning ServiceNotFound: spec.rules[0].http.paths[0].backend: service "web" not found`},
	}, {
		name: "FindingAlreadyToldSaysNothing", obj: ingress("a", "ua", "1"), told: told("ua", noService),
		reports: map[string]sourceReport{"s": {unchecked, unmanaged(desired("a", "ua"), noService)}},
		wantWhy: whyUnmanaged, wantFrom: "s", wantTold: true, wantForget: true,
	}, {
		name: "NewFindingAloneIsAnnounced", obj: ingress("a", "ua", "1"), told: told("ua", noService),
		reports: map[string]sourceReport{"s": {unchecked, unmanaged(desired("a", "ua"), noService, noTLS)}},
		wantWhy: whyUnmanaged, wantFrom: "s", wantTold: true, wantForget: true,
		wantEvents: []string{"Normal TLSIgnored: tls is served by the default certificate"},
	}, {
		name: "LastFindingGoneIsAnnouncedResolved", obj: ingress("a", "ua", "1"), told: told("ua", noService),
		reports: map[string]sourceReport{"s": {unchecked, unmanaged(desired("a", "ua"))}},
		wantWhy: whyUnmanaged, wantFrom: "s", wantTold: true, wantForget: true,
		wantEvents: []string{resolved},
	}, {
		name: "RecreatedIngressIsToldAfresh", obj: ingress("a", "ua-new", "1"), told: told("ua", noService),
		reports: map[string]sourceReport{"s": {unchecked, unmanaged(desired("a", "ua-new"), noService)}},
		wantWhy: whyUnmanaged, wantFrom: "s", wantTold: true, wantForget: true,
		wantEvents: []string{`Warning ServiceNotFound: spec.rules[0].http.paths[0].backend: service "web" not found`},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The writer decides on its view of each Ingress (statusView), made here from the
			// whole Ingress, so that the table also holds the view to what decides.
			in := ingressInput{obj: viewOf(tc.obj), reports: reportsOf(tc.reports), classes: tc.classes, released: tc.released, told: tc.told}
			dec := decideIngress(in)
			checkIngressDecision(t, in, dec)
			if dec.write != tc.wantWrite || !slices.Equal(ipsOf(dec.lb), tc.wantLB) || (!dec.write && dec.why != tc.wantWhy) {
				t.Errorf("decision: write %v %v (why %q); want write %v %v (why %q)", dec.write, ipsOf(dec.lb), dec.why, tc.wantWrite, tc.wantLB, tc.wantWhy)
			}
			var wantReport *watchv1.ObjectStatus
			if tc.wantFrom != "" {
				wantReport = tc.reports[tc.wantFrom].status
			}
			if dec.report != wantReport {
				from := "none"
				for src, r := range tc.reports {
					if r.status == dec.report {
						from = src
					}
				}
				t.Errorf("the report of source %q decides, want %q's", from, tc.wantFrom)
			}
			var events []string
			for _, e := range dec.events {
				events = append(events, fmt.Sprintf("%s %s: %s", e.typ, e.reason, e.message))
			}
			if !slices.Equal(events, tc.wantEvents) {
				t.Errorf("events\n got %q\nwant %q", events, tc.wantEvents)
			}
			if (dec.told != nil) != tc.wantTold {
				t.Errorf("told replaced: %v, want %v", dec.told != nil, tc.wantTold)
			}
			if dec.forgetReleased != tc.wantForget {
				t.Errorf("released forgotten: %v, want %v", dec.forgetReleased, tc.wantForget)
			}

			// Once done, the decision decides nothing more: the written addresses read back
			// equal, and what was said is not said again.
			after := in
			if dec.write {
				after.obj = withLB(in.obj, dec.lb)
			}
			if dec.told != nil {
				after.told = *dec.told
			}
			if dec.forgetReleased {
				after.released = nil
			}
			again := decideIngress(after)
			if again.write || len(again.events) > 0 {
				t.Errorf("once done, the decision decides more: write %v %v, events %v", again.write, ipsOf(again.lb), again.events)
			}
		})
	}
}

// checkIngressDecision checks what holds of every decision: an Event is about the Ingress
// decided on, and a decision without a write says why.
func checkIngressDecision(t *testing.T, in ingressInput, dec ingressDecision) {
	t.Helper()
	for _, e := range dec.events {
		if in.obj == nil || e.ref.Kind != "Ingress" || e.ref.Namespace != in.obj.namespace || e.ref.Name != in.obj.name || e.ref.UID != in.obj.uid {
			t.Errorf("event %s about %+v, not the Ingress decided on", e.reason, e.ref)
		}
	}
	if !dec.write && dec.why == "" {
		t.Error("no write, and no reason why")
	}
	if dec.write && dec.why != "" {
		t.Errorf("a write with a reason not to: %q", dec.why)
	}
}

// reportsOf is m's reports in source name order.
func reportsOf(m map[string]sourceReport) sourceReports {
	out := make(sourceReports, 0, len(m))
	for src, r := range m {
		out = append(out, namedReport{source: src, sourceReport: r})
	}
	slices.SortFunc(out, func(a, b namedReport) int { return strings.Compare(a.source, b.source) })
	return out
}

// docs/design.md, "Cold start": the writer keeps what an object was told only while it has
// findings. An object told of none holds no entry, and announcing findings to it afterwards,
// and their resolution, goes as for an object that was never told anything.
func TestSaidKeepsOnlyObjectsToldOfFindings(t *testing.T) {
	w := &Writer{said: map[objKey]announced{}}
	k := objKey{kind: KindIngress, key: key{"ns", "a"}}
	ref := ingressRef(statusView(ingress("a", "ua", "1")))
	finding := &watchv1.StatusFinding{Reason: "ServiceNotFound", Message: `service "web" not found`, Warning: true}
	steps := []struct {
		findings   []*watchv1.StatusFinding
		wantEvents []string
		wantKept   bool
	}{
		{findings: nil, wantKept: false},
		{findings: []*watchv1.StatusFinding{finding}, wantEvents: []string{"ServiceNotFound"}, wantKept: true},
		{findings: []*watchv1.StatusFinding{finding}, wantKept: true},
		{findings: nil, wantEvents: []string{"FindingsResolved"}, wantKept: false},
		{findings: nil, wantKept: false},
	}
	for i, s := range steps {
		told, events := announce(w.said[k], ref, s.findings)
		w.tell(k, told)
		var reasons []string
		for _, e := range events {
			reasons = append(reasons, e.reason)
		}
		if !slices.Equal(reasons, s.wantEvents) {
			t.Fatalf("step %d: events %v, want %v", i, reasons, s.wantEvents)
		}
		if _, kept := w.said[k]; kept != s.wantKept {
			t.Fatalf("step %d: entry kept = %v, want %v", i, kept, s.wantKept)
		}
	}
}
