package contract

// Annotations of Ingress classes, read by the translator and the watcher alike.
const (
	AnnotationIngressClass = "kubernetes.io/ingress.class"
	AnnotationDefaultClass = "ingressclass.kubernetes.io/is-default-class"
)

// IngressClassInfo is what MayReport needs of an IngressClass. (The contract takes plain
// values, not Kubernetes types, so that the pusher and the Caddy module do not link them.)
type IngressClassInfo struct {
	Controller string
	// Default is the is-default-class annotation set to "true".
	Default bool
}

// ClassClaim is what an Ingress says about its class.
type ClassClaim struct {
	// ClassName is spec.ingressClassName; nil when unset.
	ClassName *string
	// Annotation is the legacy kubernetes.io/ingress.class annotation.
	Annotation string
}

// MayReport says whether a translator whose identity serves IngressClass class may have its
// status written to an Ingress that claims ing: the Ingress names that class
// (spec.ingressClassName or the legacy annotation), or names an IngressClass of controller
// (the translator's --controller-name, which the watcher is told too) or of the same
// controller as class, or names no class while no default IngressClass belongs to another
// controller. It is the watcher's guard against a translator writing the status of another
// controller's Ingresses, and no narrower than what the translator serves
// (translate.Translator's ours, which owns a class by the same first two rules), so an
// honest report is never refused.
func MayReport(ing ClassClaim, class, controller string, classes map[string]IngressClassInfo) bool {
	same := classes[class].Controller
	ours := func(name string) bool {
		if name == class {
			return true
		}
		c, ok := classes[name]
		return ok && ((controller != "" && c.Controller == controller) || (same != "" && c.Controller == same))
	}
	switch {
	case ing.ClassName != nil:
		return ours(*ing.ClassName)
	case ing.Annotation != "":
		return ing.Annotation == class
	}
	others := false
	for name, c := range classes {
		if !c.Default {
			continue
		}
		if ours(name) {
			return true
		}
		others = true
	}
	return !others
}
