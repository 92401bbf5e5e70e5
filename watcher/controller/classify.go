package controller

import (
	"errors"
	"net"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Classify names the cause of a list or watch failure, for logs, metrics and the sync
// timeout message.
func Classify(err error) string {
	var netErr net.Error
	switch {
	case apierrors.IsForbidden(err):
		return "forbidden (403)"
	case apierrors.IsUnauthorized(err):
		return "unauthorized (401)"
	case apierrors.IsNotFound(err):
		return "not served (404)"
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.As(err, &netErr):
		return "apiserver unreachable"
	case apierrors.IsTooManyRequests(err):
		return "throttled (429)"
	case apierrors.IsResourceExpired(err), apierrors.IsGone(err):
		return "resource version expired"
	default:
		return "error"
	}
}
