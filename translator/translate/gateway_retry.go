package translate

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sluice-io/sluice/internal/contract"
	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// defaultRetryAttempts is how many times a rule's requests are tried again when its retry
// policy does not say (the Gateway API leaves it to the implementation): once.
const defaultRetryAttempts = 1

// retryPolicy is a rule's retry policy as routes carry it (nil: the rule retries nothing),
// or why the rule cannot be served with it. Without codes nothing is retried: a data plane
// tries a request again only on an answer of one of them. An unset backoff is none. The
// policy is checked as every data plane checks it (contract.CheckRetry), so attempts over
// contract.MaxRetryAttempts or a backoff over contract.MaxRetryBackoff drop the rule.
func retryPolicy(r *gatewayv1.HTTPRouteRetry) (*configv1.Retry, string) {
	if len(r.Codes) == 0 {
		return nil, ""
	}
	out := &configv1.Retry{Attempts: defaultRetryAttempts}
	for _, c := range r.Codes {
		if c < 400 || c > 599 {
			return nil, fmt.Sprintf("code %d is not an error status (400-599)", c)
		}
		out.Codes = append(out.Codes, uint32(c))
	}
	if r.Attempts != nil {
		if *r.Attempts < 1 || *r.Attempts > contract.MaxRetryAttempts {
			return nil, fmt.Sprintf("attempts %d (1 to %d)", *r.Attempts, contract.MaxRetryAttempts)
		}
		out.Attempts = uint32(*r.Attempts)
	}
	if r.Backoff != nil {
		d, err := time.ParseDuration(string(*r.Backoff))
		if err != nil {
			return nil, fmt.Sprintf("invalid backoff %q: %v", *r.Backoff, err)
		}
		if d > 0 {
			out.Backoff = durationpb.New(d)
		}
	}
	if err := contract.CheckRetry(out); err != nil {
		return nil, err.Error()
	}
	return out, ""
}
