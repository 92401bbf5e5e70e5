package translate

import (
	"net/http"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// Match returns the route a plain-HTTP GET for host and path, without headers or query, is
// sent to, or nil (404). The reference router is contract.Match (it sees the whole request:
// scheme, method, headers, query); this is its shorthand for Ingress-only callers.
func Match(r *configv1.Resources, host, path string) *configv1.Route {
	return contract.Match(r, contract.Request{Scheme: "http", Host: host, Method: http.MethodGet, Path: path, Header: http.Header{}})
}

// PathMatches reports whether a path match accepts path (contract.PathMatches).
func PathMatches(m *configv1.PathMatch, path string) bool { return contract.PathMatches(m, path) }
