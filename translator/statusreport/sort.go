package statusreport

import (
	"sort"

	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

func less(a, b *watchv1.IngressKey) bool {
	if a.GetNamespace() != b.GetNamespace() {
		return a.GetNamespace() < b.GetNamespace()
	}
	return a.GetName() < b.GetName()
}

func sortStatuses(s []*watchv1.IngressStatus) {
	sort.Slice(s, func(i, j int) bool { return less(s[i].GetKey(), s[j].GetKey()) })
}

func sortKeys(s []*watchv1.IngressKey) {
	sort.Slice(s, func(i, j int) bool { return less(s[i], s[j]) })
}
