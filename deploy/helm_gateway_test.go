package deploy_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/sluice-io/sluice/internal/contract"
	pusherapp "github.com/sluice-io/sluice/pusher/app"
	translatorapp "github.com/sluice-io/sluice/translator/app"
)

// containerArgs are the args of the container named container in Deployment/deployment.
func containerArgs(t *testing.T, m manifest, deployment, container string) []string {
	t.Helper()
	cs, _ := field(m["Deployment/"+deployment], "spec", "template", "spec", "containers").([]any)
	for _, c := range cs {
		if field(c.(map[string]any), "name") != container {
			continue
		}
		var out []string
		as, _ := field(c.(map[string]any), "args").([]any)
		for _, a := range as {
			out = append(out, a.(string))
		}
		return out
	}
	t.Fatalf("no container %s in Deployment/%s", container, deployment)
	return nil
}

// componentSettings parses args with a component's own flags and checks them as the
// component does when it starts (Validate). The flags every process has (cli.Main's: the
// log's and --config) are taken and left unchecked, and the Pod's TLS files are not here:
// --tls-* give way to --insecure, which changes nothing of the listeners.
func componentSettings(t *testing.T, name string, args []string, register func(*pflag.FlagSet), validate func() error) {
	t.Helper()
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	for _, common := range []string{"config", "log-level", "log-format"} {
		fs.String(common, "", "")
	}
	register(fs)
	var kept []string
	for _, a := range args {
		if !strings.HasPrefix(a, "--tls-cert=") && !strings.HasPrefix(a, "--tls-key=") && !strings.HasPrefix(a, "--tls-ca=") {
			kept = append(kept, a)
		}
	}
	if err := fs.Parse(append(kept, "--insecure")); err != nil {
		t.Fatalf("the %s's rendered args %v: %v", name, args, err)
	}
	if err := validate(); err != nil {
		t.Fatalf("the %s refuses its rendered args %v: %v", name, args, err)
	}
}

// servicePorts are a Service's ports as port -> targetPort, and its named targetPorts
// (the main listeners', "http" and "https") apart.
func servicePorts(t *testing.T, svc map[string]any) (numbered map[int]int, named []string) {
	t.Helper()
	numbered = map[int]int{}
	ps, _ := field(svc, "spec", "ports").([]any)
	for _, p := range ps {
		port, target := field(p.(map[string]any), "port"), field(p.(map[string]any), "targetPort")
		if s, ok := target.(string); ok {
			named = append(named, s)
			continue
		}
		if _, dup := numbered[int(port.(float64))]; dup {
			t.Errorf("%v: port %v twice", field(svc, "metadata", "name"), port)
		}
		numbered[int(port.(float64))] = int(target.(float64))
	}
	return numbered, named
}

// docs/design.md and docs/operations.md, "Gateway addresses and ports": the chart's gateway
// values give the translator and every pusher the same list. For each value set, every
// listener the translator's flags make its routes name (contract.ListenerName of each
// --gateway-port on the shared address, or of each Gateway port on each --gateway-address
// and --gateway-reserved-address) is exactly one --proxy-listener of the pusher, of the same
// scheme, and nothing else is; the addresses marked reserved: true, and only they, are the
// translator's reserved ones;
// both components accept their args as they would at start; each bind port is a port of the
// Caddy container and open in the proxy's NetworkPolicy; and each Service port in front of a
// further listener (Service/sluice-proxy's for the shared address, one Service per address,
// of the pool or reserved, with that address) targets the port its listener binds. And without gateway
// values, none of it renders: the defaults stay as they were (TestHelmChartIsTheKustomizeBase
// holds them field for field to deploy/base).
func TestHelmGatewayListenersAgree(t *testing.T) {
	for _, tc := range []struct {
		name, ns string
		args     []string
		// addressField is where the addresses' Services carry their address.
		addressField string
		// reserved are the addresses the values mark reserved: true.
		reserved []string
	}{
		{"defaults", "sluice-system", nil, "", nil},
		{"further ports", "sluice-system", []string{"--set-json",
			`gateway.ports=[{"port":8080,"protocol":"HTTP","targetPort":18080},{"port":8443,"protocol":"HTTPS","targetPort":18443}]`}, "", nil},
		// Two pool addresses and a reserved one.
		{"address pool", "sluice-system", []string{"-f", gatewayValues}, "loadBalancerIP", []string{"203.0.113.23"}},
		// An IPv6 address (its listener name in brackets) and externalIPs.
		{"custom", "sluice-custom", []string{"-f", customValues}, "externalIPs", nil},
		// A reserved IPv6 address beside a pool one, the reserved one first in the values.
		{"reserved", "sluice-system", []string{"--set-json", `gateway.addresses=[` +
			`{"address":"2001:DB8::22","reserved":true,"ports":[{"port":80,"targetPort":19081},{"port":443,"targetPort":19444}]},` +
			`{"address":"203.0.113.21","reserved":false,"ports":[{"port":80,"targetPort":19080},{"port":443,"targetPort":19443}]}]`},
			"loadBalancerIP", []string{"2001:db8::22"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := parseManifest(t, helmTemplate(t, tc.ns, tc.args...), tc.ns)

			var ts translatorapp.Settings
			tArgs := containerArgs(t, m, "sluice-translator", "translator")
			componentSettings(t, "translator", tArgs, ts.Register, ts.Validate)
			var ps pusherapp.Settings
			pArgs := containerArgs(t, m, "sluice-proxy", "pusher")
			componentSettings(t, "pusher", pArgs, ps.Register, ps.Validate)

			// The listeners the translator names: name -> HTTPS.
			type port struct {
				port  int32
				https bool
			}
			ports := []port{{ts.GatewayHTTPPort, false}, {ts.GatewayHTTPSPort, true}}
			for _, v := range ts.GatewayPorts {
				pn, proto, _ := strings.Cut(v, "/")
				p, _ := strconv.Atoi(pn)
				ports = append(ports, port{int32(p), proto == "HTTPS"})
			}
			main := func(https bool) int32 {
				return map[bool]int32{false: ts.GatewayHTTPPort, true: ts.GatewayHTTPSPort}[https]
			}
			// The reserved addresses are the translator's --gateway-reserved-address, and get
			// their listeners and Services as the pool's do.
			var reserved []string
			for _, a := range ts.GatewayReservedAddresses {
				reserved = append(reserved, netip.MustParseAddr(a).String())
			}
			if !slices.Equal(reserved, tc.reserved) {
				t.Errorf("the translator's reserved addresses are %v (pool %v), want %v", reserved, ts.GatewayAddresses, tc.reserved)
			}
			named := map[string]bool{}
			pool := map[string][]string{} // address, of the pool or reserved -> its listener names
			for _, a := range slices.Concat(ts.GatewayAddresses, ts.GatewayReservedAddresses) {
				addr := netip.MustParseAddr(a).String() // as the translator keeps it
				for _, p := range ports {
					name := contract.ListenerName(addr, p.port, main(p.https))
					named[name] = p.https
					pool[addr] = append(pool[addr], name)
				}
			}
			if len(ts.GatewayAddresses) == 0 {
				for _, p := range ports[2:] {
					named[contract.ListenerName("", p.port, main(p.https))] = p.https
				}
			}

			// The pusher's listeners: name -> bind port, each name once, as the translator names it.
			binds := map[string]int{}
			for _, v := range ps.ProxyListeners {
				scheme, rest, _ := strings.Cut(v, ":")
				name, listen, _ := strings.Cut(rest, "=")
				https, ok := named[name]
				switch {
				case !ok:
					t.Errorf("pusher --proxy-listener=%s: the translator names no listener %q", v, name)
				case https != (scheme == "https"):
					t.Errorf("pusher --proxy-listener=%s: the translator serves %q with HTTPS %v", v, name, https)
				}
				if _, dup := binds[name]; dup {
					t.Errorf("pusher --proxy-listener=%s: listener %q twice", v, name)
				}
				p, err := strconv.Atoi(strings.TrimPrefix(listen, ":"))
				if err != nil || !strings.HasPrefix(listen, ":") {
					t.Errorf("pusher --proxy-listener=%s: binds %q, not :PORT on every address of the Pod", v, listen)
				}
				binds[name] = p
			}
			for name := range named {
				if _, ok := binds[name]; !ok {
					t.Errorf("the translator names listener %q, and no pusher --proxy-listener binds it", name)
				}
			}

			// Each bind port is the Caddy container's and open in the NetworkPolicy.
			var containerPorts []int
			cs, _ := field(m["Deployment/sluice-proxy"], "spec", "template", "spec", "containers").([]any)
			for _, p := range field(cs[0].(map[string]any), "ports").([]any) {
				containerPorts = append(containerPorts, int(field(p.(map[string]any), "containerPort").(float64)))
			}
			var open []int // nil when networkPolicies.enabled is false
			openPorts, _ := field(m["NetworkPolicy/sluice-proxy"], "spec", "ingress", 0, "ports").([]any)
			for _, p := range openPorts {
				open = append(open, int(field(p.(map[string]any), "port").(float64)))
			}
			for name, p := range binds {
				if !slices.Contains(containerPorts, p) {
					t.Errorf("listener %s binds %d, not a port of the Caddy container %v", name, p, containerPorts)
				}
				if m["NetworkPolicy/sluice-proxy"] != nil && !slices.Contains(open, p) {
					t.Errorf("listener %s binds %d, which NetworkPolicy/sluice-proxy does not open (%v)", name, p, open)
				}
			}
			if want := 3 + len(binds); len(containerPorts) != want {
				t.Errorf("the Caddy container has ports %v, want http, https, caddy-metrics and the %d listeners'", containerPorts, len(binds))
			}

			// Service/sluice-proxy: the main listeners by name, and each further port of the
			// shared address to its listener's bind.
			shared, mainNamed := servicePorts(t, m["Service/sluice-proxy"])
			if fmt.Sprint(mainNamed) != "[http https]" {
				t.Errorf("Service/sluice-proxy targets %v by name, want [http https]", mainNamed)
			}
			for p, target := range shared {
				if bind, ok := binds[strconv.Itoa(p)]; !ok || bind != target {
					t.Errorf("Service/sluice-proxy port %d targets %d, its listener %q binds %d (bound: %v)", p, target, strconv.Itoa(p), bind, ok)
				}
			}
			for name := range named {
				if _, err := strconv.Atoi(name); err == nil {
					if p, _ := strconv.Atoi(name); shared[p] == 0 {
						t.Errorf("listener %s of the shared address is no port of Service/sluice-proxy", name)
					}
				}
			}

			// One Service per address, of the pool or reserved, with that address, its ports each
			// to the bind of ADDRESS:PORT, all of the address's listeners and no other.
			services := map[string]map[string]any{}
			for k, obj := range m {
				if _, ok := field(obj, "metadata", "labels", "sluice.io/gateway-address").(string); ok && strings.HasPrefix(k, "Service/") {
					var addr string
					switch tc.addressField {
					case "loadBalancerIP":
						if field(obj, "spec", "type") != "LoadBalancer" {
							t.Errorf("%s is of type %v, want LoadBalancer", k, field(obj, "spec", "type"))
						}
						addr, _ = field(obj, "spec", "loadBalancerIP").(string)
					case "externalIPs":
						if ips, _ := field(obj, "spec", "externalIPs").([]any); len(ips) != 1 || field(obj, "spec", "type") != "ClusterIP" {
							t.Errorf("%s: type %v, externalIPs %v, want ClusterIP with the address", k, field(obj, "spec", "type"), ips)
						}
						addr, _ = field(obj, "spec", "externalIPs", 0).(string)
					default:
						t.Errorf("%s rendered without gateway.addresses", k)
					}
					if _, dup := services[addr]; dup {
						t.Errorf("two Services for address %s", addr)
					}
					services[addr] = obj
				}
			}
			if len(services) != len(pool) {
				t.Errorf("%d Services for the %d addresses %v and reserved %v", len(services), len(pool), ts.GatewayAddresses, ts.GatewayReservedAddresses)
			}
			for addr, names := range pool {
				svc, ok := services[addr]
				if !ok {
					t.Errorf("no Service for address %s", addr)
					continue
				}
				if sel := field(svc, "spec", "selector", "app.kubernetes.io/name"); sel != "sluice-proxy" {
					t.Errorf("the Service of %s selects %v, not the proxy Pods", addr, sel)
				}
				sp, byName := servicePorts(t, svc)
				if len(byName) > 0 || len(sp) != len(names) {
					t.Errorf("the Service of %s has ports %v (and %v by name), want one for each of %v", addr, sp, byName, names)
				}
				for p, target := range sp {
					name := contract.ListenerName(addr, int32(p), 0)
					if bind, ok := binds[name]; !ok || bind != target {
						t.Errorf("the Service of %s: port %d targets %d, its listener %q binds %d (bound: %v)", addr, p, target, name, bind, ok)
					}
				}
			}

			// Without gateway values, the components get none of these flags and nothing else
			// renders.
			if tc.args == nil {
				for _, a := range slices.Concat(tArgs, pArgs) {
					if strings.HasPrefix(a, "--gateway-") || strings.HasPrefix(a, "--proxy-listener") {
						t.Errorf("the defaults render %s", a)
					}
				}
				if len(binds) != 0 || len(shared) != 0 || len(services) != 0 {
					t.Errorf("the defaults render listeners %v, Service/sluice-proxy ports %v, pool Services %d", binds, shared, len(services))
				}
				return
			}
			if len(binds) == 0 {
				t.Fatal("no --proxy-listener rendered")
			}
		})
	}
}

// The gateway values change only what they are for: the translator's and the proxies'
// Deployments, the proxies' Service and NetworkPolicy, and the addresses' Services (the
// reserved one's too); every other object renders as with the defaults.
func TestHelmGatewayValuesChangeOnlyTheirObjects(t *testing.T) {
	def := parseManifest(t, helmTemplate(t, "sluice-system"), "sluice-system")
	got := parseManifest(t, helmTemplate(t, "sluice-system", "-f", gatewayValues), "sluice-system")
	touched := []string{"Deployment/sluice-translator", "Deployment/sluice-proxy", "NetworkPolicy/sluice-proxy"}
	for _, k := range touched {
		delete(def, k)
		delete(got, k)
	}
	for _, k := range []string{"Service/sluice-proxy-203-0-113-21", "Service/sluice-proxy-203-0-113-22", "Service/sluice-proxy-203-0-113-23"} {
		if _, ok := got[k]; !ok {
			t.Errorf("%s not rendered", k)
		}
		delete(got, k)
	}
	if d := def.diff(got); d != "" {
		t.Fatalf("%s changes more than %v and the addresses' Services:\n%s", gatewayValues, touched, d)
	}
}

// The translator refuses --gateway-reserved-address without a --gateway-address (every
// Gateway would share the published addresses), so a render with every address of
// gateway.addresses reserved fails, saying so, rather than giving the translator args it
// exits on.
func TestHelmGatewayAllReservedFails(t *testing.T) {
	// The translator's own check: gatewayValues' addresses all reserved.
	m := parseManifest(t, helmTemplate(t, "sluice-system", "-f", gatewayValues), "sluice-system")
	var args []string
	for _, a := range containerArgs(t, m, "sluice-translator", "translator") {
		args = append(args, strings.Replace(a, "--gateway-address=", "--gateway-reserved-address=", 1))
	}
	var ts translatorapp.Settings
	fs := pflag.NewFlagSet("translator", pflag.ContinueOnError)
	ts.Register(fs)
	if err := fs.Parse(slices.DeleteFunc(args, func(a string) bool { return !strings.HasPrefix(a, "--gateway-") })); err != nil {
		t.Fatal(err)
	}
	if len(ts.GatewayAddresses) != 0 || len(ts.GatewayReservedAddresses) != 3 || ts.Validate() == nil {
		t.Fatalf("the translator accepts only reserved addresses %v (pool %v)", ts.GatewayReservedAddresses, ts.GatewayAddresses)
	}

	const ports = `"ports":[{"port":80,"targetPort":19080},{"port":443,"targetPort":19443}]`
	for _, tc := range []struct {
		name, addresses string
	}{
		{"one", `[{"address":"203.0.113.21","reserved":true,` + ports + `}]`},
		{"two", `[{"address":"203.0.113.21","reserved":true,` + ports + `},` +
			`{"address":"203.0.113.22","reserved":true,"ports":[{"port":80,"targetPort":19081},{"port":443,"targetPort":19444}]}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := helmRun(t, "template", "sluice", chart, "--namespace", "sluice-system", "--set-json", "gateway.addresses="+tc.addresses)
			if err == nil {
				t.Fatalf("every address reserved renders (%d bytes)", len(out))
			}
			if !strings.Contains(err.Error(), "gateway.addresses: every address is reserved") {
				t.Fatalf("every address reserved fails with %v, which does not say so", err)
			}
		})
	}
}
