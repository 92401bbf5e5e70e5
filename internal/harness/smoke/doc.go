// Package smoke holds the tests that start each Sluice binary as a real process and talk to
// it the way an outside client does: through the generated gRPC code and the HTTP endpoints.
package smoke
