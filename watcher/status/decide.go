package status

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-io/sluice/internal/contract"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// sourceReport is one source's report about an object, of either API, with who sent it: a
// checked origin may act only on Ingresses of its class, and on Gateway API objects only when
// it serves the watcher's Gateway controller (gatewayRefusal).
type sourceReport struct {
	from   Origin
	status *watchv1.ObjectStatus
}

// sourceReports are the reports about one object, one per source, in source name order.
// Nearly every object has one, so a slice, not a map: a map of one entry took 576 bytes, and
// every write the Writer queues holds its object's (at 100k Ingresses, 30 MB of the
// watcher's heap while the writes of a cold start drain at --status-qps).
type sourceReports []namedReport

// namedReport is a source's report, with the source's name.
type namedReport struct {
	source string
	sourceReport
}

// ingressInput is everything that decides one Ingress's status. Nothing in it changes after
// it is made (the Writer replaces its class map rather than changing it), so that a worker
// may decide again on a fresh read after a conflict.
type ingressInput struct {
	// obj is the Ingress as the store (or, after a conflict, a fresh read) shows it; nil when
	// it does not exist.
	obj *ingressView
	// reports are the reports about it, one per source, in source name order.
	reports sourceReports
	// classes are the IngressClasses, and controller the Ingress controller name the
	// translators serve, for contract.MayReport.
	classes    map[string]contract.IngressClassInfo
	controller string
	// released are addresses a source set and then let go of; nil when none.
	released []*watchv1.LoadBalancerIngress
	// told is what the object has been told of its findings.
	told announced
}

// event is one Event to record.
type event struct {
	ref                  *corev1.ObjectReference
	typ, reason, message string
}

// ingressDecision is what an Ingress needs.
type ingressDecision struct {
	// report is the report that decides; nil when no source may.
	report *watchv1.ObjectStatus
	// write says to set status.loadBalancer.ingress to lb (nil removes it).
	write bool
	lb    []*watchv1.LoadBalancerIngress
	// events are to be recorded; told, when set, is what the object has been told now.
	events []event
	told   *announced
	// forgetReleased says the released addresses need no watching any more.
	forgetReleased bool
	// why names, when nothing is written, the rule that decided so (for tests and debug logs).
	why string
}

// Why an Ingress status is not written, besides the reasons shared with decideGateway
// (whyAbsent, whyNoReport, whyUIDMismatch, whyEqual).
const (
	whyNotItsClass = "not its class"     // every report is from a translator of another class
	whyUnmanaged   = "not managed"       // the report leaves the addresses to others
	whyOthers      = "others' addresses" // released, but the Ingress shows addresses others set
)

// decideIngress decides one Ingress's status. It is pure: the same input gives the same
// decision.
//
//   - The report that decides is the one of the smallest source name among those that may
//     act on the Ingress (mayAct: a checked translator only on Ingresses of its class).
//   - A report is acted on only when its uid is the Ingress's: a recreated Ingress waits for
//     a report about it.
//   - Findings become Events (announce), once each, whether or not the report manages the
//     addresses.
//   - A report that manages the addresses sets them; nothing is written when the Ingress
//     already shows them.
//   - When no source may decide, addresses a source set and let go of (released) are taken
//     back while the Ingress shows exactly those; addresses others set are left alone. So an
//     Ingress that leaves our class loses our addresses once its translator lets go of it.
//   - A report that decides, or an Ingress that shows no addresses, ends the watch on
//     released addresses.
func decideIngress(in ingressInput) ingressDecision {
	ing := in.obj
	d, refused := chooseReport(in)
	dec := ingressDecision{report: d}
	switch {
	case ing == nil:
		dec.why = whyAbsent
	case d != nil:
		dec.forgetReleased = true
		if string(ing.uid) != d.GetUid() {
			dec.why = whyUIDMismatch
			break
		}
		told, events := announce(in.told, ingressRef(ing), d.GetFindings())
		dec.told, dec.events = &told, events
		lb := contract.LoadBalancerOf(d.GetAddresses())
		switch {
		case !d.GetManageAddresses():
			dec.why = whyUnmanaged
		case contract.SameLoadBalancer(loadBalancerOf(ing), lb):
			dec.why = whyEqual
		default:
			dec.write, dec.lb = true, lb
		}
	case in.released == nil:
		dec.why = whyNoReport
		if refused {
			dec.why = whyNotItsClass
		}
	default:
		// Kept until the Ingress shows exactly those addresses (the store may not have seen
		// the write that set them yet) or shows none.
		switch cur := loadBalancerOf(ing); {
		case len(cur) == 0:
			dec.forgetReleased, dec.why = true, whyEqual
		case contract.SameLoadBalancer(cur, in.released):
			dec.write = true
		default:
			dec.why = whyOthers
		}
	}
	return dec
}

// chooseReport is the report of the smallest source name that may act on the Ingress (any
// source when it does not exist); refused says a report was passed over for its class.
func chooseReport(in ingressInput) (best *watchv1.ObjectStatus, refused bool) {
	for _, r := range in.reports { // in source name order: the first that may act is chosen
		if in.obj != nil && !mayAct(r.from, in.obj, in.controller, in.classes) {
			refused = true
			continue
		}
		if best == nil {
			best = r.status
		}
	}
	return best, refused
}

// mayAct says whether a report from a translator may decide ing's status: always when its
// origin is not checked (authorization off), else only for an Ingress of its class.
func mayAct(from Origin, ing *ingressView, controller string, classes map[string]contract.IngressClassInfo) bool {
	if !from.Checked {
		return true
	}
	claim := contract.ClassClaim{ClassName: ing.className, Annotation: ing.classAnnotation}
	return contract.MayReport(claim, from.Class, controller, classes)
}

// announce is the Events of findings on ref, given what it was told before (prev): a Warning
// (or Normal) Event for each finding it has not been told about, and one Normal Event when
// its last finding went away. It returns what it has been told now: nothing (the zero
// announced, no map) when there are no findings, as for an object never told anything.
func announce(prev announced, ref *corev1.ObjectReference, findings []*watchv1.StatusFinding) (announced, []event) {
	if prev.uid != ref.UID {
		prev = announced{uid: ref.UID}
	}
	var next announced
	if len(findings) > 0 {
		next = announced{uid: ref.UID, findings: make(map[string]bool, len(findings))}
	}
	var out []event
	for _, f := range findings {
		sig := f.GetReason() + "\x00" + f.GetField() + "\x00" + f.GetMessage()
		next.findings[sig] = true
		if !prev.findings[sig] {
			typ := corev1.EventTypeWarning
			if !f.GetWarning() {
				typ = corev1.EventTypeNormal
			}
			msg := f.GetMessage()
			if f.GetField() != "" {
				msg = f.GetField() + ": " + msg
			}
			out = append(out, event{ref: ref, typ: typ, reason: f.GetReason(), message: msg})
		}
	}
	if len(findings) == 0 && len(prev.findings) > 0 {
		out = append(out, event{ref: ref, typ: corev1.EventTypeNormal, reason: "FindingsResolved",
			message: "every finding was resolved; the " + ref.Kind + " is served as written"})
	}
	return next, out
}

// loadBalancerOf is an Ingress's status.loadBalancer.ingress in the form translators report
// it (contract.SortLoadBalancer), so that the two compare.
func loadBalancerOf(ing *ingressView) []*watchv1.LoadBalancerIngress {
	var out []*watchv1.LoadBalancerIngress
	for _, i := range ing.lb {
		out = append(out, &watchv1.LoadBalancerIngress{Ip: i.IP, Hostname: i.Hostname})
	}
	contract.SortLoadBalancer(out)
	return out
}
