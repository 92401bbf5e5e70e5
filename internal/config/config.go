// Package config loads a process's settings. Every setting is a command-line flag, the
// environment variable SLUICE_<NAME> (upper case, dashes as underscores), and a key of an
// optional --config file (YAML, JSON or TOML); a flag wins over the environment, which wins
// over the file. Values from every source go through the flag's own parser, so a bad value
// is reported the same way wherever it came from.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// EnvPrefix is the prefix of every environment variable Sluice reads.
const EnvPrefix = "SLUICE"

// Error is a bad setting. Its message is one line that names the setting and the cause.
type Error struct {
	Setting string
	Value   string
	// From says where a value not given as a flag came from: "environment", or the path
	// of the --config file. Empty: the command line, or a check of the settings together.
	From  string
	Cause error
}

func (e *Error) Error() string {
	from := ""
	switch e.From {
	case "":
	case fromEnv:
		from = " from the environment"
	default:
		from = " in config file " + e.From
	}
	if e.Value == "" {
		return fmt.Sprintf("invalid setting --%s (%s)%s: %v", e.Setting, EnvName(e.Setting), from, e.Cause)
	}
	return fmt.Sprintf("invalid setting --%s (%s) %q%s: %v", e.Setting, EnvName(e.Setting), e.Value, from, e.Cause)
}

const fromEnv = "environment"

func (e *Error) Unwrap() error { return e.Cause }

// Errorf returns an *Error for setting.
func Errorf(setting, value, format string, args ...any) error {
	return &Error{Setting: setting, Value: value, Cause: fmt.Errorf(format, args...)}
}

// EnvName is the environment variable of a setting.
func EnvName(setting string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(setting, "-", "_"))
}

// ErrHelp is returned by Load when --help was asked for; the usage was printed.
var ErrHelp = pflag.ErrHelp

// Load parses args into fs, then fills every flag not given on the command line from the
// environment and the config file named by --config (if fs has that flag and it is set).
// lookupEnv is os.LookupEnv in production.
func Load(fs *pflag.FlagSet, args []string, lookupEnv func(string) (string, bool)) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return ErrHelp
		}
		if name, ok := strings.CutPrefix(err.Error(), "unknown flag: --"); ok {
			if s := Closest(name, flagNames(fs)); s != "" {
				return fmt.Errorf("%w (did you mean --%s? see --help)", err, s)
			}
		}
		return fmt.Errorf("%w (see --help)", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	}
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	v := viper.New()
	if f := fs.Lookup("config"); f != nil {
		path := f.Value.String()
		if !f.Changed {
			if env, ok := lookupEnv(EnvName("config")); ok {
				path = env
			}
		}
		if path != "" {
			v.SetConfigFile(path)
			if err := v.ReadInConfig(); err != nil {
				return &Error{Setting: "config", Value: path, Cause: err}
			}
			for _, key := range v.AllKeys() {
				if fs.Lookup(key) == nil {
					hint := ""
					if s := Closest(key, flagNames(fs)); s != "" {
						hint = fmt.Sprintf(" (did you mean %q?)", s)
					}
					return &Error{Setting: "config", Value: path, Cause: fmt.Errorf("unknown setting %q in file%s", key, hint)}
				}
			}
		}
	}
	var firstErr error
	fs.VisitAll(func(f *pflag.Flag) {
		if firstErr != nil || f.Changed || f.Name == "config" {
			return
		}
		var value, from string
		if env, ok := lookupEnv(EnvName(f.Name)); ok {
			value, from = env, fromEnv
		} else if v.IsSet(f.Name) {
			value, from = stringify(v.Get(f.Name)), v.ConfigFileUsed()
		} else {
			return
		}
		if err := fs.Set(f.Name, value); err != nil {
			firstErr = &Error{Setting: f.Name, Value: value, From: from, Cause: unwrapFlagErr(err)}
		}
	})
	return firstErr
}

// UnknownVar is a SLUICE_* environment variable that names no setting of the process.
type UnknownVar struct {
	Name string
	// Suggestion is the closest variable the process reads; empty when none is near.
	Suggestion string
}

// UnknownEnv lists the SLUICE_* variables of environ (os.Environ's form) that name no setting
// of fs, by name. Such a variable is ignored, not refused: one environment may serve several
// Sluice processes, and a setting of one is not another's; the process logs them so that a
// typo does not pass unseen.
func UnknownEnv(fs *pflag.FlagSet, environ []string) []UnknownVar {
	known := map[string]bool{}
	var envs []string
	fs.VisitAll(func(f *pflag.Flag) {
		known[EnvName(f.Name)] = true
		envs = append(envs, EnvName(f.Name))
	})
	var out []UnknownVar
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, EnvPrefix+"_") && !known[name] {
			out = append(out, UnknownVar{Name: name, Suggestion: Closest(name, envs)})
		}
	}
	slices.SortFunc(out, func(a, b UnknownVar) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func flagNames(fs *pflag.FlagSet) []string {
	var out []string
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			out = append(out, f.Name)
		}
	})
	return out
}

// Closest is the candidate nearest to typed (case aside) within two edits, or a candidate
// typed is a prefix of; "" when none is near. Ties go to the smallest name, so that the
// suggestion is the same every time.
func Closest(typed string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		d := editDistance(strings.ToLower(typed), strings.ToLower(c))
		if len(typed) >= 2 && strings.HasPrefix(c, typed) {
			d = min(d, 1)
		}
		if d < bestD || d == bestD && c < best {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is Levenshtein's distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// stringify turns a config-file value into what the flag parser expects.
func stringify(val any) string {
	switch t := val.(type) {
	case []any:
		parts := make([]string, len(t))
		for i, p := range t {
			parts[i] = fmt.Sprint(p)
		}
		return strings.Join(parts, ",")
	case []string:
		return strings.Join(t, ",")
	default:
		return fmt.Sprint(val)
	}
}

// unwrapFlagErr strips pflag's own wording around a parse error; Error names the setting.
func unwrapFlagErr(err error) error {
	for u := errors.Unwrap(err); u != nil; u = errors.Unwrap(u) {
		err = u
	}
	return err
}

// CheckHostPort validates a listen or dial address of the form host:port.
func CheckHostPort(setting, value string, allowEmpty bool) error {
	if value == "" {
		if allowEmpty {
			return nil
		}
		return Errorf(setting, value, "must not be empty")
	}
	host, port, err := net.SplitHostPort(value)
	if err != nil {
		return &Error{Setting: setting, Value: value, Cause: errors.New("want host:port")}
	}
	if host != "" && strings.ContainsAny(host, " /") {
		return Errorf(setting, value, "bad host %q", host)
	}
	if _, err := net.LookupPort("tcp", port); err != nil || port == "" {
		return Errorf(setting, value, "bad port %q", port)
	}
	return nil
}

// CheckURL validates an http(s) or unix URL.
func CheckURL(setting, value string) error {
	u, err := url.Parse(value)
	if err != nil {
		return &Error{Setting: setting, Value: value, Cause: err}
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return Errorf(setting, value, "missing host")
		}
	case "unix":
		if u.Path == "" {
			return Errorf(setting, value, "missing socket path (unix:///path/to/socket)")
		}
	default:
		return Errorf(setting, value, "want an http://, https:// or unix:// URL")
	}
	return nil
}

// CheckReadable validates that a file setting, when set, names a readable file.
func CheckReadable(setting, path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return &Error{Setting: setting, Value: path, Cause: errors.Unwrap(err)}
	}
	return f.Close()
}

// CheckNamespacedName validates that value is "namespace/name", both parts non-empty.
func CheckNamespacedName(setting, value string) error {
	ns, name, ok := strings.Cut(value, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return Errorf(setting, value, "must be namespace/name")
	}
	return nil
}

// CheckOneOf validates that value is one of allowed.
func CheckOneOf(setting, value string, allowed []string) error {
	for _, a := range allowed {
		if value == a {
			return nil
		}
	}
	return Errorf(setting, value, "want one of %s", strings.Join(allowed, ", "))
}
