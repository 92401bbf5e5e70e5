package gate

import (
	"errors"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// Refusals is implemented by errors that name what the data plane refused (a route, a
// certificate), so that the NACK names the objects at fault and the translator leaves them
// out.
type Refusals interface{ Refusals() []contract.Refusal }

// objectsAtFault traces the resources err names to their source objects in st, the state of
// the version refused (nil: none are known).
func objectsAtFault(err error, st *contract.State) []*configv1.ObjectRef {
	var r Refusals
	if st == nil || !errors.As(err, &r) || len(r.Refusals()) == 0 {
		return nil
	}
	vh := func(h string) *configv1.VirtualHost {
		m, _ := st.Get(contract.VirtualHosts, h).(*configv1.VirtualHost)
		return m
	}
	cert := func(n string) *configv1.Certificate {
		m, _ := st.Get(contract.Certificates, n).(*configv1.Certificate)
		return m
	}
	if out := contract.SourcesOf(r.Refusals(), vh, cert); len(out) > 0 {
		return out
	}
	return nil
}

// objectNames are objs as "Kind namespace/name", for logs.
func objectNames(objs []*configv1.ObjectRef) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	return out
}
