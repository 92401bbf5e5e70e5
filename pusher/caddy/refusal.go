package caddy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/sluice-io/sluice/internal/contract"
)

// RenderError is a config the renderer cannot turn into stock Caddy's config: the routes it
// refused (stock Caddy reads some names as patterns; a route refers to a backend the config
// lacks), each with its error.
type RenderError struct {
	Refused []contract.Refusal
	Causes  []error
	More    int // refusals beyond contract.MaxRefusals, not kept
}

func (e *RenderError) Error() string {
	msgs := make([]string, 0, len(e.Causes))
	for i, c := range e.Causes {
		msgs = append(msgs, fmt.Sprintf("route %s: %v", e.Refused[i].Route, c))
	}
	msg := strings.Join(msgs, "; ")
	if e.More > 0 {
		msg += fmt.Sprintf(" (and %d more)", e.More)
	}
	return msg
}

// Unwrap gives the first route's error.
func (e *RenderError) Unwrap() error {
	if len(e.Causes) == 0 {
		return nil
	}
	return e.Causes[0]
}

// add records route on host as refused (once: a route served on both schemes is rendered
// twice).
func (e *RenderError) add(host, route string, err error) {
	r := contract.Refusal{Host: host, Route: route}
	for _, have := range e.Refused {
		if have == r {
			return
		}
	}
	if len(e.Refused) >= contract.MaxRefusals {
		e.More++
		return
	}
	e.Refused, e.Causes = append(e.Refused, r), append(e.Causes, err)
}

// Refusals are the resources Caddy, or the renderer for it, refused (gate.Refusals).
func (e *RejectedError) Refusals() []contract.Refusal { return e.Refused }

// rejectedRender is the RejectedError of a config that cannot be rendered, naming what the
// renderer refused.
func rejectedRender(err error) *RejectedError {
	rej := &RejectedError{Status: 0, Message: "cannot render: " + err.Error()}
	var re *RenderError
	if errors.As(err, &re) {
		rej.Refused = re.Refused
	}
	return rej
}

// refusedOf reads what the Sluice module's 422 answer names as refused (contract.RefusedHeader).
func refusedOf(resp *http.Response) []contract.Refusal {
	var out []contract.Refusal
	if h := resp.Header.Get(contract.RefusedHeader); h != "" && json.Unmarshal([]byte(h), &out) == nil && len(out) <= contract.MaxRefusals {
		return out
	}
	return nil
}
