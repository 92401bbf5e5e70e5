package translate

// One Ingress: whether it is served, and what it contributes before the hosts it shares are
// resolved (hosts.go): its routes, TLS claims and own findings.

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// ingressOut is what one Ingress contributes, before the hosts it shares are resolved.
type ingressOut struct {
	// ing is the Ingress while it is translated (translateIngress), nil after: what is read
	// of it then is meta (compact.go, storedIngress).
	ing      *networkingv1.Ingress
	meta     ingressMeta
	class    string // spec.ingressClassName, "" when unset
	served   bool
	classful bool // has spec.ingressClassName or the class annotation
	findings []*configv1.Finding
	services []nsName
	secrets  []nsName
	claims   hostClaims // host -> claims, in the Ingress's own order
	refs     []backendRef
	nginx    *nginxIngress // shared by every Ingress without annotations it reads (plainNginx)
}

func ingressKey(k nsName) string { return "Ingress/" + k.ns + "/" + k.name }

// ours says whether the translator serves ing, with the finding that decision carries.
func (t *Translator) ours(ing *networkingv1.Ingress) (bool, *configv1.Finding) {
	switch {
	case ing.Spec.IngressClassName != nil:
		name := *ing.Spec.IngressClassName
		c, ok := t.classes[name]
		switch {
		case ok && c.Spec.Controller == t.opts.ControllerName:
			return true, nil
		case !ok && name == t.opts.IngressClass:
			return true, finding(ing, "spec.ingressClassName", sevWarn, "IngressClassNotFound",
				fmt.Sprintf("IngressClass %q does not exist; served because it is this translator's class", name))
		case name == t.opts.IngressClass:
			// The cut-over from another controller: its class is named as ours, so both serve
			// the same Ingresses side by side (docs/migrating-from-ingress-nginx.md).
			return true, finding(ing, "spec.ingressClassName", sevWarn, "IngressClassOfAnotherController",
				fmt.Sprintf("IngressClass %q names controller %q; served because it is this translator's class (--ingress-class)", name, c.Spec.Controller))
		}
		return false, nil
	case ing.Annotations[AnnotationIngressClass] != "":
		return ing.Annotations[AnnotationIngressClass] == t.opts.IngressClass, nil
	default:
		return t.defaultClass || (t.opts.WatchIngressWithoutClass && !t.foreignDefault), nil
	}
}

// retranslate rebuilds one Ingress's contribution and marks what it touches.
func (t *Translator) retranslate(k nsName) {
	old, had := t.local[k]
	if had {
		t.unindex(k, old)
	}
	delete(t.local, k)
	t.statusDirty.add(k)
	t.dirtyFindings.add("Ingress/" + k.ns + "/" + k.name)
	s, ok := t.ingresses[k]
	if !ok {
		return
	}
	var lo *ingressOut
	if ing, err := s.take(); err != nil {
		// The same bytes decoded when they came: not expected, but never a crash. The
		// Ingress is left out, and whose it was is as its last translation said.
		lo = &ingressOut{meta: ingressMeta{Namespace: s.Namespace, Name: s.Name}}
		if had {
			lo.meta, lo.class, lo.classful, lo.served = old.meta, old.class, old.classful, old.served
		}
		lo.findings = []*configv1.Finding{{Object: lo.meta.ref(), Cause: "object does not decode: " + err.Error(),
			Severity: sevError, Reason: "Undecodable"}}
	} else {
		lo = t.translateIngress(ing)
		lo.ing = nil
	}
	t.local[k] = lo
	t.index(k, lo)
}

func (t *Translator) index(k nsName, lo *ingressOut) {
	switch {
	case lo.class != "":
		t.classUsers.add(lo.class, k)
	case !lo.classful:
		t.classless.add(k)
	}
	for _, s := range lo.services {
		t.svcUsers.add(s, k)
	}
	for _, s := range lo.secrets {
		t.secretUsers.add(s, k)
	}
	for _, h := range lo.claims.hosts {
		t.hostUsers.add(h, k)
		t.dirtyHosts.add(h)
	}
	for _, r := range lo.refs {
		t.setBackendTLS(r.name, r.tls)
		if !t.backendUsers.has(r.name) {
			t.rebuildBackend(r.name)
		}
		t.backendUsers.add(r.name, ingressKey(k))
	}
}

func (t *Translator) unindex(k nsName, lo *ingressOut) {
	if lo.class != "" {
		t.classUsers.remove(lo.class, k)
	}
	delete(t.classless, k)
	for _, s := range lo.services {
		t.svcUsers.remove(s, k)
	}
	for _, s := range lo.secrets {
		t.secretUsers.remove(s, k)
	}
	for _, h := range lo.claims.hosts {
		t.hostUsers.remove(h, k)
		t.dirtyHosts.add(h)
	}
	for _, r := range lo.refs {
		t.backendUsers.remove(r.name, ingressKey(k))
		if !t.backendUsers.has(r.name) {
			t.dropBackend(r.name)
		}
	}
}

// translateIngress is the part of the translation that depends on one Ingress alone (and
// on the classes, Services and Secrets it names).
func (t *Translator) translateIngress(ing *networkingv1.Ingress) *ingressOut {
	lo := &ingressOut{ing: ing, meta: metaOf(ing)}
	if ing.Spec.IngressClassName != nil {
		lo.class, lo.classful = *ing.Spec.IngressClassName, true
	} else if ing.Annotations[AnnotationIngressClass] != "" {
		lo.classful = true
	}
	served, f := t.ours(ing)
	if !served {
		return lo
	}
	lo.served = true
	if f != nil {
		lo.findings = append(lo.findings, f)
	}
	if _, ok := t.quarantines()[ingressKey(nsName{ing.Namespace, ing.Name})]; ok {
		return lo // served by no route; the finding is the object's own (buildFindings)
	}
	add := func(field string, sev configv1.FindingSeverity, reason, cause string) {
		lo.findings = append(lo.findings, finding(ing, field, sev, reason, cause))
	}
	seq := 0
	claimOn := func(host string, c claim) {
		seq++
		c.seq = seq
		lo.claims.add(host, c)
	}

	timeout := requestTimeout(ing, add)
	regexPaths := ing.Annotations[AnnotationPathRegex] == "true"
	ngx, kept := *plainNginx, plainNginx
	if readsNginx(ing.Annotations) {
		ngx = readNginx(ing, add)
		kept = ngx.kept()
	}
	lo.nginx = kept
	if ngx.auth != nil && !t.resolveAuth(lo, ngx.auth) {
		ngx.refused = true
	}
	if ngx.proxySSL != nil && !t.resolveProxySSL(lo, ngx.proxySSL) {
		ngx.refused = true
	}
	if ngx.refused {
		return lo // served by no route: the findings say which annotation keeps it out
	}

	t.claimTLS(lo, ngx.canary != nil, add, claimOn)
	t.claimRules(lo, &ngx, timeout, regexPaths, add, claimOn)
	if len(ngx.aliases) > 0 && len(ing.Spec.Rules) > 0 {
		claimAliases(lo, ngx.aliases, claimOn)
	}
	if ngx.toWWW {
		claimWWWRedirects(ing, claimOn)
	}
	if ngx.appRoot != "" {
		claimAppRoot(ing, ngx.appRoot, claimOn)
	}
	if ing.Spec.DefaultBackend != nil {
		t.claimDefaultBackend(lo, claimOn)
	}
	return lo
}

// requestTimeout is the timeout an Ingress's AnnotationRequestTimeout asks for; nil when it
// has none, or an invalid one (a finding says so).
func requestTimeout(ing *networkingv1.Ingress, add func(field string, sev configv1.FindingSeverity, reason, cause string)) *durationpb.Duration {
	var timeout *durationpb.Duration
	if v, ok := ing.Annotations[AnnotationRequestTimeout]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			add("metadata.annotations["+AnnotationRequestTimeout+"]", sevWarn, "InvalidAnnotation",
				fmt.Sprintf("invalid duration %q (want a positive duration such as \"30s\"); served without a timeout", v))
		} else {
			timeout = durationpb.New(d)
		}
	}
	return timeout
}

// claimTLS claims the certificate of each spec.tls entry on its hosts (the rules' hosts when
// it names none), where the certificate covers them. A canary's entries are not used.
func (t *Translator) claimTLS(lo *ingressOut, canary bool, add func(field string, sev configv1.FindingSeverity, reason, cause string), claimOn func(host string, c claim)) {
	ing := lo.ing
	// Hosts of this Ingress's rules, for TLS entries without hosts.
	var ruleHosts []string
	for _, r := range ing.Spec.Rules {
		if r.Host != "" {
			ruleHosts = append(ruleHosts, r.Host)
		}
	}
	for i, entry := range ing.Spec.TLS {
		field := fmt.Sprintf("spec.tls[%d]", i)
		if canary {
			// As ingress-nginx: a canary serves the main Ingress's paths, certificate and all.
			add(field, sevWarn, "CanaryNotServed", "a canary Ingress's tls is not used: the main Ingress's host has the certificate it has")
			continue
		}
		hosts := entry.Hosts
		if len(hosts) == 0 {
			hosts = ruleHosts
		}
		if entry.SecretName == "" {
			add(field+".secretName", sevError, "SecretNotFound", "no secretName: the hosts are not served over HTTPS")
			continue
		}
		sk := nsName{ing.Namespace, entry.SecretName}
		lo.secrets = append(lo.secrets, sk)
		name := sk.ns + "/" + sk.name
		c := t.certificate(sk)
		if c.cert == nil {
			add(field+".secretName", sevError, c.reason, c.why)
			continue
		}
		for _, h := range hosts {
			if !covers(c.cert.GetDnsNames(), h) {
				add(field+".hosts", sevError, "CertificateHostMismatch", fmt.Sprintf("certificate %s does not cover host %q (it covers %s); the host is not served over HTTPS",
					name, h, strings.Join(c.cert.GetDnsNames(), ", ")))
				continue
			}
			claimOn(h, claim{cert: name, field: field + ".hosts", hostField: field + ".hosts"})
		}
	}
}

// claimRules claims the route of each path of the Ingress's rules on its host.
func (t *Translator) claimRules(lo *ingressOut, ngx *nginxIngress, timeout *durationpb.Duration, regexPaths bool, add func(field string, sev configv1.FindingSeverity, reason, cause string), claimOn func(host string, c claim)) {
	ing := lo.ing
	for ri, rule := range ing.Spec.Rules {
		field := fmt.Sprintf("spec.rules[%d]", ri)
		host := rule.Host
		if host != "" {
			if err := checkHost(host); err != "" {
				add(field+".host", sevError, "InvalidHost", err+"; the rule is not served")
				continue
			}
		}
		if rule.HTTP == nil {
			continue
		}
		for pi, p := range rule.HTTP.Paths {
			pfield := fmt.Sprintf("%s.http.paths[%d]", field, pi)
			pathType := string(networkingv1.PathTypeImplementationSpecific)
			if p.PathType != nil {
				pathType = string(*p.PathType)
			}
			if ngx.canary != nil {
				// A canary's path only names the main Ingress's path it joins (canary.go):
				// it is matched as written, and its route is only its backend.
				route := &configv1.Route{Name: fmt.Sprintf("%s/%s/rules[%d]/paths[%d]", ing.Namespace, ing.Name, ri, pi), Source: ref(ing)}
				if b := t.resolveBackend(lo, p.Backend, pfield+".backend"); b != "" {
					route.Backends = []*configv1.WeightedBackend{{Backend: b, Weight: 1}}
				}
				claimOn(host, claim{route: route, field: pfield, hostField: field + ".host", path: p.Path, pathType: pathType})
				continue
			}
			pm, err := pathMatch(p, regexPaths)
			if ngx.regex {
				pm, err = nginxPath(p.Path)
			}
			if err != "" {
				add(pfield, sevError, "InvalidPath", err+"; the path is not served")
				continue
			}
			route := &configv1.Route{
				Name:    fmt.Sprintf("%s/%s/rules[%d]/paths[%d]", ing.Namespace, ing.Name, ri, pi),
				Path:    pm,
				Timeout: timeout,
				Source:  ref(ing),
			}
			ngx.apply(route, p.Path)
			// Every rule a data plane enforces, so that none refuses the config for this path.
			if err := contract.CheckRoute(route); err != nil {
				add(pfield+".path", sevError, "InvalidPath", err.Error()+"; the path is not served")
				continue
			}
			if route.Redirect == nil {
				if b := t.resolveBackend(lo, p.Backend, pfield+".backend"); b != "" {
					route.Backends = []*configv1.WeightedBackend{{Backend: b, Weight: 1}}
				}
			}
			c := claim{route: route, key: routeKey{host, pm.Type, pm.Value}, field: pfield, hostField: field + ".host", path: p.Path, pathType: pathType}
			if !ngx.regex {
				c.variants = &routeVariants{}
			}
			claimOn(host, c)
		}
	}
}

// claimAliases claims, for server-alias, the routes of the Ingress's first rule's host on
// each alias, as ingress-nginx adds the aliases to that host's server.
func claimAliases(lo *ingressOut, aliases []string, claimOn func(host string, c claim)) {
	ing := lo.ing
	first := ing.Spec.Rules[0].Host
	hosts := map[string]bool{}
	for _, r := range ing.Spec.Rules {
		hosts[r.Host] = true
	}
	for _, a := range aliases {
		if hosts[a] {
			continue // a host of the Ingress's own rules already
		}
		hosts[a] = true
		for _, c := range lo.claims.of(first) {
			if c.route == nil {
				continue
			}
			c.key.host, c.hostField = a, "metadata.annotations["+NginxAnnotationPrefix+"server-alias]"
			claimOn(a, c)
		}
	}
}

// claimWWWRedirects claims, for from-to-www-redirect, the other name of each rule's host
// (with or without "www."): it answers 308 to the same URL on the host, as ingress-nginx's
// redirect server does, and yields to any rule of the other name, as a defaultBackend does.
func claimWWWRedirects(ing *networkingv1.Ingress, claimOn func(host string, c claim)) {
	done := map[string]bool{}
	for ri, rule := range ing.Spec.Rules {
		h := rule.Host
		if h == "" || strings.HasPrefix(h, "*.") || done[h] || checkHost(h) != "" {
			continue
		}
		done[h] = true
		other := "www." + h
		if rest, ok := strings.CutPrefix(h, "www."); ok {
			other = rest
		}
		if checkHost(other) != "" {
			continue
		}
		route := &configv1.Route{
			Name:     fmt.Sprintf("%s/%s/from-to-www-redirect[%d]", ing.Namespace, ing.Name, ri),
			Path:     &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"},
			Source:   ref(ing),
			Redirect: &configv1.Redirect{Hostname: h, StatusCode: 308},
		}
		claimOn(other, claim{defaultBackend: true, route: route, key: routeKey{other, route.Path.Type, "/"},
			field: "metadata.annotations[" + NginxAnnotationPrefix + "from-to-www-redirect]", hostField: fmt.Sprintf("spec.rules[%d].host", ri)})
	}
}

// claimAppRoot claims, for app-root, "/" of every host of the rules: it redirects to the
// application's root.
func claimAppRoot(ing *networkingv1.Ingress, appRoot string, claimOn func(host string, c claim)) {
	done := map[string]bool{}
	for ri, rule := range ing.Spec.Rules {
		if done[rule.Host] || (rule.Host != "" && checkHost(rule.Host) != "") {
			continue
		}
		done[rule.Host] = true
		route := &configv1.Route{
			Name:   fmt.Sprintf("%s/%s/app-root", ing.Namespace, ing.Name),
			Path:   &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_EXACT, Value: "/"},
			Source: ref(ing),
			Redirect: &configv1.Redirect{StatusCode: 302,
				Path: &configv1.PathModifier{Type: configv1.PathModifierType_PATH_MODIFIER_TYPE_FULL, Value: appRoot}},
		}
		claimOn(rule.Host, claim{route: route, key: routeKey{rule.Host, route.Path.Type, "/"}, field: "metadata.annotations[" + NginxAnnotationPrefix + "app-root]",
			hostField: fmt.Sprintf("spec.rules[%d].host", ri), path: "/"})
	}
}

// claimDefaultBackend claims the route of spec.defaultBackend on the catch-all host.
func (t *Translator) claimDefaultBackend(lo *ingressOut, claimOn func(host string, c claim)) {
	ing := lo.ing
	route := &configv1.Route{
		Name:   fmt.Sprintf("%s/%s/defaultBackend", ing.Namespace, ing.Name),
		Path:   &configv1.PathMatch{Type: configv1.PathMatchType_PATH_MATCH_TYPE_PREFIX, Value: "/"},
		Source: ref(ing),
	}
	if b := t.resolveBackend(lo, *ing.Spec.DefaultBackend, "spec.defaultBackend"); b != "" {
		route.Backends = []*configv1.WeightedBackend{{Backend: b, Weight: 1}}
	}
	claimOn("", claim{defaultBackend: true, route: route, key: routeKey{"", route.Path.Type, "/"}, field: "spec.defaultBackend", hostField: "spec.defaultBackend"})
}
