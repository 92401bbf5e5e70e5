// Package version holds the build's version, stamped by the Makefile with -ldflags.
package version

// Version is the software version of this build ("dev" when not stamped).
var Version = "dev"
