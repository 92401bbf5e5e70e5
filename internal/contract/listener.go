package contract

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// ListenerName is Route.listener for a Gateway listener on port of address: "" for the
// proxy's main listeners (the shared address, address "", on the scheme's main port
// mainPort), the port alone ("8080") for another port of the shared address, and
// "ADDRESS:PORT" ("192.0.2.21:80", "[2001:db8::1]:80") for a Gateway's own address. The
// translator names routes with it and the pusher's --proxy-listener flags name Caddy's
// servers with the same strings (docs/design.md, "Gateway addresses and ports").
func ListenerName(address string, port, mainPort int32) string {
	switch {
	case address == "" && port == mainPort:
		return ""
	case address == "":
		return strconv.Itoa(int(port))
	}
	return net.JoinHostPort(address, strconv.Itoa(int(port)))
}

// CheckListenerName says why name is not a listener name ListenerName could give (nil when
// it is one); "" is the main listeners', never a further listener's.
func CheckListenerName(name string) error {
	if p, err := strconv.ParseUint(name, 10, 16); err == nil {
		if p == 0 {
			return fmt.Errorf("listener %q: port 0", name)
		}
		return nil
	}
	ap, err := netip.ParseAddrPort(name)
	if err != nil || ap.Port() == 0 {
		return fmt.Errorf("listener %q: must be a port (\"8080\") or an IP address and port (\"192.0.2.21:80\")", name)
	}
	return nil
}
