package gate

import (
	"regexp"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// tooLargeRE is how gRPC names a received message over the limit.
var tooLargeRE = regexp.MustCompile(`received message (?:after decompression )?larger than max \((\d+) vs\. (\d+)\)`)

// messageTooLarge reports whether err is gRPC refusing a received message over this
// pusher's limit, with the message's size and the limit. Reconnecting does not help: the
// translator sends the same version again.
func messageTooLarge(err error) (size, limit int, ok bool) {
	st, isStatus := status.FromError(err)
	if !isStatus || st.Code() != codes.ResourceExhausted {
		return 0, 0, false
	}
	m := tooLargeRE.FindStringSubmatch(st.Message())
	if m == nil {
		return 0, 0, false
	}
	size, _ = strconv.Atoi(m[1])
	limit, _ = strconv.Atoi(m[2])
	return size, limit, true
}
