package translate

import (
	"fmt"
	"time"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// defaultSessionName is a rule's session cookie's name when its sessionPersistence names
// none (the Gateway API leaves it to the implementation).
const defaultSessionName = "sluice-session"

// sessionAffinity is a rule's sessionPersistence as routes carry it (Route.session_affinity,
// what ingress-nginx's affinity: cookie is too), or why the rule cannot be served with it:
// a cookie pins a client to an endpoint; Permanent lifetime is a cookie with Max-Age
// absoluteTimeout. Header-based persistence, and a session cookie with an absoluteTimeout
// (which the proxy would have to track), are not supported.
func sessionAffinity(sp *gatewayv1.SessionPersistence) (*configv1.SessionAffinity, string) {
	if sp.Type != nil && *sp.Type != gatewayv1.CookieBasedSessionPersistence {
		return nil, fmt.Sprintf("type %s is not supported (Cookie is)", *sp.Type)
	}
	a := &configv1.SessionAffinity{CookieName: defaultSessionName, Path: "/"}
	if sp.SessionName != nil && *sp.SessionName != "" {
		a.CookieName = *sp.SessionName
	}
	permanent := sp.CookieConfig != nil && sp.CookieConfig.LifetimeType != nil && *sp.CookieConfig.LifetimeType == gatewayv1.PermanentCookieLifetimeType
	if sp.AbsoluteTimeout != nil {
		d, err := time.ParseDuration(string(*sp.AbsoluteTimeout))
		if err != nil || d < time.Second {
			return nil, fmt.Sprintf("absoluteTimeout %q is not a duration of a second or more", *sp.AbsoluteTimeout)
		}
		if !permanent {
			return nil, "a Session cookie with an absoluteTimeout is not supported (a Permanent one is)"
		}
		a.MaxAgeSeconds = uint32(min(d/time.Second, 1<<31-1))
	} else if permanent {
		return nil, "a Permanent cookie needs an absoluteTimeout"
	}
	if err := contract.CheckSessionAffinity(a); err != nil {
		return nil, err.Error()
	}
	return a, ""
}
