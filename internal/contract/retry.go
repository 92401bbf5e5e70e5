package contract

import (
	"fmt"
	"slices"
	"time"

	configv1 "github.com/sluice-io/sluice/proto/gen/sluice/config/v1"
)

// This file is the reference for a route's retries (the Gateway API's HTTPRouteRetry): when
// a data plane tries a request again, and which try's answer the client gets.

// Bounds on a route's retry policy. Each try is one more request to a backend, so the
// attempts are bounded as mirrors are; the backoff bounds how long one request can be held
// between tries (a route's timeout bounds the whole, when it has one).
const (
	// MaxRetryAttempts bounds Retry.attempts: a request is tried at most this many times
	// again.
	MaxRetryAttempts = 10
	// MaxRetryBackoff bounds Retry.backoff.
	MaxRetryBackoff = 30 * time.Second
	// MaxRetryBodyBytes is the largest request body a data plane holds to send it again: a
	// request with a larger body, or a body of unknown length, is tried once (its body
	// cannot be sent twice without holding it all).
	MaxRetryBodyBytes = 64 << 10
)

// CheckRetry returns what makes r unusable: a code outside 400-599 or given twice, attempts
// of 0 or over MaxRetryAttempts, a negative backoff or one over MaxRetryBackoff. A nil r
// (no retries) is fine.
func CheckRetry(r *configv1.Retry) error {
	if r == nil {
		return nil
	}
	for i, c := range r.GetCodes() {
		if c < 400 || c > 599 {
			return fmt.Errorf("code %d (400-599)", c)
		}
		if slices.Contains(r.GetCodes()[:i], c) {
			return fmt.Errorf("code %d given twice", c)
		}
	}
	if a := r.GetAttempts(); a == 0 || a > MaxRetryAttempts {
		return fmt.Errorf("%d attempts (1 to %d)", a, MaxRetryAttempts)
	}
	if b := r.GetBackoff(); b != nil {
		if err := b.CheckValid(); err != nil {
			return fmt.Errorf("backoff: %w", err)
		}
		if d := b.AsDuration(); d < 0 || d > MaxRetryBackoff {
			return fmt.Errorf("backoff %s (0 to %s)", d, MaxRetryBackoff)
		}
	}
	return nil
}

// RetryAgain reports whether a request of route rt whose try number tries (1 for the first)
// was answered with status is tried again: rt retries that status and fewer than
// Retry.attempts tries again were made. A data plane that cannot send the request again
// (its body over MaxRetryBodyBytes) does not, and the answer is the client's.
func RetryAgain(rt *configv1.Route, tries int, status int) bool {
	r := rt.GetRetry()
	if r == nil || tries < 1 || tries > int(r.GetAttempts()) {
		return false
	}
	return slices.Contains(r.GetCodes(), uint32(status))
}

// RetryBackoff is how long a data plane waits before trying a request of rt again.
func RetryBackoff(rt *configv1.Route) time.Duration {
	return max(rt.GetRetry().GetBackoff().AsDuration(), 0)
}

// RetriedAnswer is what the client of a request of rt gets when its backends would answer
// its tries, in order, with statuses (the last one repeated if more tries are made): the
// status of the try that is not tried again, and how many tries were made.
func RetriedAnswer(rt *configv1.Route, statuses []int) (status, tries int) {
	if len(statuses) == 0 {
		return 0, 0
	}
	for tries = 1; ; tries++ {
		status = statuses[min(tries, len(statuses))-1]
		if !RetryAgain(rt, tries, status) {
			return status, tries
		}
	}
}
