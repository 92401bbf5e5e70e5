package contract

import (
	"sort"
	"strings"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// HostLess orders hosts as requests try them: exact names, then wildcards, then the
// catch-all "", each group sorted.
func HostLess(a, b string) bool {
	rank := func(h string) int {
		switch {
		case h == "":
			return 2
		case strings.HasPrefix(h, "*."):
			return 1
		}
		return 0
	}
	if rank(a) != rank(b) {
		return rank(a) < rank(b)
	}
	return a < b
}

// ObjectLess orders object references by kind, namespace, then name.
func ObjectLess(a, b *configv1.ObjectRef) bool {
	if a.GetKind() != b.GetKind() {
		return a.GetKind() < b.GetKind()
	}
	if a.GetNamespace() != b.GetNamespace() {
		return a.GetNamespace() < b.GetNamespace()
	}
	return a.GetName() < b.GetName()
}

// KeyOfObject is the key of an object's findings: "kind/namespace/name" (no part of which
// can hold a slash).
func KeyOfObject(o *configv1.ObjectRef) string {
	return o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
}

// ObjectOfKey is the reference (kind, namespace and name only) a findings key names.
func ObjectOfKey(key string) *configv1.ObjectRef {
	parts := strings.SplitN(key, "/", 3)
	for len(parts) < 3 {
		parts = append(parts, "")
	}
	return &configv1.ObjectRef{Kind: parts[0], Namespace: parts[1], Name: parts[2]}
}

// FindingLess is the canonical order of findings: by object, field, cause, severity, then
// reason. It is total for distinct findings of distinct objects' keys.
func FindingLess(a, b *configv1.Finding) bool {
	if ao, bo := a.GetObject(), b.GetObject(); KeyOfObject(ao) != KeyOfObject(bo) {
		return ObjectLess(ao, bo)
	}
	if a.GetField() != b.GetField() {
		return a.GetField() < b.GetField()
	}
	if a.GetCause() != b.GetCause() {
		return a.GetCause() < b.GetCause()
	}
	if a.GetSeverity() != b.GetSeverity() {
		return a.GetSeverity() < b.GetSeverity()
	}
	return a.GetReason() < b.GetReason()
}

// SortFindings puts findings in their canonical order.
func SortFindings(fs []*configv1.Finding) {
	sort.SliceStable(fs, func(i, j int) bool { return FindingLess(fs[i], fs[j]) })
}

// GroupFindings groups findings per object, each group in canonical order, the groups in
// object order.
func GroupFindings(fs []*configv1.Finding) []*configv1.ObjectFindings {
	byKey := map[string]*configv1.ObjectFindings{}
	var out []*configv1.ObjectFindings
	for _, f := range fs {
		k := KeyOfObject(f.GetObject())
		g, ok := byKey[k]
		if !ok {
			g = &configv1.ObjectFindings{Object: ObjectOfKey(k)}
			byKey[k] = g
			out = append(out, g)
		}
		g.Findings = append(g.Findings, f)
	}
	for _, g := range out {
		SortFindings(g.Findings)
	}
	sort.Slice(out, func(i, j int) bool { return ObjectLess(out[i].GetObject(), out[j].GetObject()) })
	return out
}
