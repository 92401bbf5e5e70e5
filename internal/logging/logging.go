// Package logging builds the processes' hclog loggers and routes the logs of the libraries
// Sluice uses (client-go's klog, grpc-go's grpclog) into them, so that every line a process
// prints has one format.
package logging

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/go-logr/logr"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/grpclog"
	"k8s.io/klog/v2"
)

// Options configures a logger.
type Options struct {
	// Name is the process name, the logger's root name.
	Name string
	// Level is trace, debug, info, warn or error.
	Level string
	// Format is "text" or "json".
	Format string
	// Output defaults to standard error.
	Output io.Writer
}

// Levels and Formats are the accepted values, for validation and help texts.
var (
	Levels  = []string{"trace", "debug", "info", "warn", "error"}
	Formats = []string{"text", "json"}
)

// New returns a logger for opts.
func New(opts Options) (hclog.Logger, error) {
	level := hclog.LevelFromString(opts.Level)
	if level == hclog.NoLevel {
		return nil, fmt.Errorf("unknown log level %q (want one of %s)", opts.Level, strings.Join(Levels, ", "))
	}
	var json bool
	switch opts.Format {
	case "text", "":
	case "json":
		json = true
	default:
		return nil, fmt.Errorf("unknown log format %q (want one of %s)", opts.Format, strings.Join(Formats, ", "))
	}
	out := opts.Output
	if out == nil {
		out = os.Stderr
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:            opts.Name,
		Level:           level,
		Output:          out,
		JSONFormat:      json,
		IncludeLocation: false,
		TimeFormat:      "2006-01-02T15:04:05.000Z07:00",
	}), nil
}

// RouteLibraryLogs sends klog and grpclog output to children of logger. Library chatter at
// info is demoted to debug: what an operator must see, the libraries log at warning or error.
func RouteLibraryLogs(logger hclog.Logger) {
	klog.SetLogger(logr.New(&klogSink{log: logger.Named("client-go")}))
	grpclog.SetLoggerV2(&grpcLogger{log: logger.Named("grpc")})
}

// klogSink adapts hclog to logr, which klog logs through once SetLogger was called.
type klogSink struct {
	log  hclog.Logger
	name string
}

func (s *klogSink) Init(logr.RuntimeInfo) {}

// Enabled maps klog verbosity onto hclog levels: V(0) is debug, higher is trace.
func (s *klogSink) Enabled(level int) bool {
	if level == 0 {
		return s.log.IsDebug()
	}
	return s.log.IsTrace()
}

func (s *klogSink) Info(level int, msg string, kv ...any) {
	if level == 0 {
		s.log.Debug(lower(msg), kv...)
		return
	}
	s.log.Trace(lower(msg), kv...)
}

func (s *klogSink) Error(err error, msg string, kv ...any) {
	s.log.Warn(lower(msg), append(kv, "error", err)...)
}

func (s *klogSink) WithValues(kv ...any) logr.LogSink {
	return &klogSink{log: s.log.With(kv...), name: s.name}
}

func (s *klogSink) WithName(name string) logr.LogSink {
	return &klogSink{log: s.log.Named(name), name: name}
}

// lower makes a library's message follow the project's style (lower-case first letter).
func lower(msg string) string {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return msg
	}
	return strings.ToLower(msg[:1]) + msg[1:]
}

// grpcLogger adapts hclog to grpclog.LoggerV2.
type grpcLogger struct{ log hclog.Logger }

func (g *grpcLogger) Info(args ...any)   { g.log.Debug(lower(fmt.Sprint(args...))) }
func (g *grpcLogger) Infoln(args ...any) { g.log.Debug(lower(fmt.Sprintln(args...))) }
func (g *grpcLogger) Infof(format string, args ...any) {
	g.log.Debug(lower(fmt.Sprintf(format, args...)))
}
func (g *grpcLogger) Warning(args ...any)   { g.log.Warn(lower(fmt.Sprint(args...))) }
func (g *grpcLogger) Warningln(args ...any) { g.log.Warn(lower(fmt.Sprintln(args...))) }
func (g *grpcLogger) Warningf(format string, args ...any) {
	g.log.Warn(lower(fmt.Sprintf(format, args...)))
}
func (g *grpcLogger) Error(args ...any)   { g.log.Error(lower(fmt.Sprint(args...))) }
func (g *grpcLogger) Errorln(args ...any) { g.log.Error(lower(fmt.Sprintln(args...))) }
func (g *grpcLogger) Errorf(format string, args ...any) {
	g.log.Error(lower(fmt.Sprintf(format, args...)))
}
func (g *grpcLogger) Fatal(args ...any) { g.log.Error(lower(fmt.Sprint(args...))); os.Exit(1) }
func (g *grpcLogger) Fatalln(args ...any) {
	g.log.Error(lower(fmt.Sprintln(args...)))
	os.Exit(1)
}
func (g *grpcLogger) Fatalf(format string, args ...any) {
	g.log.Error(lower(fmt.Sprintf(format, args...)))
	os.Exit(1)
}

// V reports whether grpc's verbosity level l is logged: 0 at debug, above at trace.
func (g *grpcLogger) V(l int) bool {
	if l <= 0 {
		return g.log.IsDebug()
	}
	return g.log.IsTrace()
}
