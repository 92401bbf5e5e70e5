package identity

import (
	"fmt"
	"slices"
	"strings"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
)

// Access is what a caller may have of an RPC.
type Access int

const (
	// Denied callers get PERMISSION_DENIED.
	Denied Access = iota
	// Redacted callers may call, read-only, and never see a private key.
	Redacted
	// Full callers get everything the RPC serves.
	Full
)

func (a Access) String() string {
	switch a {
	case Full:
		return "full"
	case Redacted:
		return "redacted"
	}
	return "denied"
}

// Rule is who may call one RPC.
type Rule struct {
	Full     []Role
	Redacted []Role
}

// Policy maps full gRPC method names to their rules. A method it does not name is denied to
// every identified caller.
type Policy map[string]Rule

// Health and reflection methods, which every server registers.
const (
	HealthCheck      = "/grpc.health.v1.Health/Check"
	HealthWatch      = "/grpc.health.v1.Health/Watch"
	HealthList       = "/grpc.health.v1.Health/List"
	ReflectionV1     = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
	ReflectionV1Alfa = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
)

// DefaultPolicy is Sluice's: keys go only where they are needed.
//   - Watch carries every TLS Secret: translators get them; the operator (sluicectl) may
//     watch with private keys removed; nobody else may watch.
//   - ReportStatus: translators, and watcher replicas relaying a translator's stream to the
//     leader (the leader then takes the source from the relayed identity).
//   - StreamConfig carries the certificates' keys: pushers get them; the operator may follow
//     it read-only without keys.
//   - GetStatus never returns a private key, and is for the operator.
//   - Health: any Sluice identity. Reflection: the operator.
func DefaultPolicy() Policy {
	all := slices.Clone(Roles)
	return Policy{
		watchv1.WatchService_Watch_FullMethodName:          {Full: []Role{Translator}, Redacted: []Role{Operator}},
		watchv1.StatusService_ReportStatus_FullMethodName:  {Full: []Role{Translator, Watcher}},
		configv1.ConfigService_StreamConfig_FullMethodName: {Full: []Role{Pusher}, Redacted: []Role{Operator}},
		configv1.ConfigService_GetStatus_FullMethodName:    {Redacted: []Role{Operator}},
		HealthCheck:      {Redacted: all},
		HealthWatch:      {Redacted: all},
		HealthList:       {Redacted: all},
		ReflectionV1:     {Redacted: []Role{Operator}},
		ReflectionV1Alfa: {Redacted: []Role{Operator}},
	}
}

// Decide says what c may have of method, and why not when it may not.
func (p Policy) Decide(method string, c Caller) (Access, string) {
	if c.Anonymous {
		return Full, ""
	}
	if c.Err != nil {
		return Denied, c.Err.Error()
	}
	rule, ok := p[method]
	if !ok {
		return Denied, fmt.Sprintf("no role may call %s", method)
	}
	switch {
	case slices.Contains(rule.Full, c.Identity.Role):
		return Full, ""
	case slices.Contains(rule.Redacted, c.Identity.Role):
		return Redacted, ""
	}
	var allowed []string
	for _, r := range append(slices.Clone(rule.Full), rule.Redacted...) {
		allowed = append(allowed, string(r))
	}
	return Denied, fmt.Sprintf("role %s may not call %s (allowed: %s)", c.Identity.Role, method, strings.Join(allowed, ", "))
}
