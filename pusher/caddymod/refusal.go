package caddymod

import (
	"fmt"
	"strings"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// RefusedError is a change refused for the resources it names (routes, certificates): the
// admin endpoint answers 422 with them beside the error, so that the pusher traces them to
// their source objects and the translator leaves those out. It is an ErrRejected.
type RefusedError struct {
	Refused []contract.Refusal
	// Causes are the refusals' errors, in the same order; More counts those not kept.
	Causes []string
	More   int
}

func (e *RefusedError) Error() string {
	msg := ErrRejected.Error() + ": " + strings.Join(e.Causes, "; ")
	if e.More > 0 {
		msg += fmt.Sprintf(" (and %d more)", e.More)
	}
	return msg
}

func (e *RefusedError) Unwrap() error { return ErrRejected }

// refusals collects what a change refuses, up to contract.MaxRefusals.
type refusals struct{ e RefusedError }

func (r *refusals) add(ref contract.Refusal, cause string) {
	if len(r.e.Refused) >= contract.MaxRefusals {
		r.e.More++
		return
	}
	r.e.Refused = append(r.e.Refused, ref)
	r.e.Causes = append(r.e.Causes, cause)
}

// merge adds what o collected after what r holds, up to contract.MaxRefusals.
func (r *refusals) merge(o *refusals) {
	for i, ref := range o.e.Refused {
		r.add(ref, o.e.Causes[i])
	}
	r.e.More += o.e.More
}

// err is the change's refusal, nil when nothing was refused.
func (r *refusals) err() error {
	if len(r.e.Refused) == 0 {
		return nil
	}
	e := r.e
	return &e
}

// testRule, set only in a build with the sluicetest tag (testrule_sluicetest.go), is a rule
// the translator does not know, so that end-to-end tests can make the module refuse a route
// the translator accepts. Production builds have none: no config can trigger it.
var testRule func(*configv1.Route) error
