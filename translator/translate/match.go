package translate

import (
	"regexp"
	"strings"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// Match returns the route a request for host and path is sent to, or nil (404). It is the
// reference for what every data plane must do with a config: the virtual hosts that apply
// are tried in order (the exact host, then a wildcard matching its first label, then the
// catch-all), and within each the routes in order; the first route that matches wins.
func Match(r *configv1.Resources, host, path string) *configv1.Route {
	host = strings.ToLower(host)
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		host = host[:i]
	}
	candidates := []string{""}
	if host != "" {
		candidates = []string{host, ""}
		if i := strings.IndexByte(host, '.'); i > 0 {
			candidates = []string{host, "*" + host[i:], ""}
		}
	}
	for _, name := range candidates {
		for _, vh := range r.GetVirtualHosts() {
			if vh.GetHostname() != name {
				continue
			}
			for _, rt := range vh.GetRoutes() {
				if PathMatches(rt.GetPath(), path) {
					return rt
				}
			}
		}
	}
	return nil
}

// PathMatches reports whether a path match accepts path.
func PathMatches(m *configv1.PathMatch, path string) bool {
	switch m.GetType() {
	case configv1.PathMatchType_PATH_MATCH_TYPE_EXACT:
		return path == m.GetValue()
	case configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX:
		v := m.GetValue()
		return v == "/" || path == v || strings.HasPrefix(path, v+"/")
	case configv1.PathMatchType_PATH_MATCH_TYPE_REGEX:
		re, err := regexp.Compile("^(?:" + m.GetValue() + ")$")
		return err == nil && re.MatchString(path)
	}
	return false
}
