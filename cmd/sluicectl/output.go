package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"sigs.k8s.io/yaml"
)

// writeProto prints one protobuf message as indented JSON or as YAML, in the one shape
// every command uses (protoJSON).
func writeProto(w io.Writer, f format, m proto.Message) error {
	b, err := protoJSON(m)
	if err != nil {
		return err
	}
	return writeJSONBytes(w, f, b)
}

// protoJSON is a message as sluicectl prints it, the same shape as the values its other
// commands print: protojson's field names and omissions, but integers as JSON numbers (not
// protojson's strings for 64-bit ones), enum values by their short name (ERROR, not
// FINDING_SEVERITY_ERROR), and bytes as text when they are text (PEM), hex otherwise (a
// digest, as watch prints it). Timestamps and durations keep protojson's strings.
func protoJSON(m proto.Message) ([]byte, error) {
	v, err := messageValue(m.ProtoReflect())
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func messageValue(m protoreflect.Message) (any, error) {
	if m.Descriptor().FullName().Parent() == "google.protobuf" {
		b, err := protojson.Marshal(m.Interface())
		return json.RawMessage(b), err
	}
	out := map[string]any{}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		var x any
		switch {
		case fd.IsList():
			l := v.List()
			xs := make([]any, l.Len())
			for i := range xs {
				if xs[i], err = singularValue(fd, l.Get(i)); err != nil {
					return false
				}
			}
			x = xs
		case fd.IsMap():
			mx := map[string]any{}
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				mx[k.String()], err = singularValue(fd.MapValue(), mv)
				return err == nil
			})
			x = mx
		default:
			x, err = singularValue(fd, v)
		}
		out[fd.JSONName()] = x
		return err == nil
	})
	return out, err
}

func singularValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) (any, error) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return messageValue(v.Message())
	case protoreflect.EnumKind:
		return enumName(fd.Enum(), v.Enum()), nil
	case protoreflect.BytesKind:
		if b := v.Bytes(); utf8.Valid(b) {
			return string(b), nil
		}
		return hex.EncodeToString(v.Bytes()), nil
	}
	return v.Interface(), nil
}

// enumName is a value's name without its enum's prefix (buf lint's ENUM_VALUE_PREFIX makes
// every value start with it); a number no value has stays a number.
func enumName(ed protoreflect.EnumDescriptor, n protoreflect.EnumNumber) any {
	vd := ed.Values().ByNumber(n)
	if vd == nil {
		return int32(n)
	}
	return shortEnum(string(vd.Name()), string(ed.Name()))
}

// shortEnum trims an enum value's UPPER_SNAKE prefix, made from its enum's CamelCase name:
// FINDING_SEVERITY_ERROR of FindingSeverity is ERROR.
func shortEnum(value, enum string) string {
	return strings.TrimPrefix(value, shortEnumPrefix(enum))
}

// shortEnumPrefix is FINDING_SEVERITY_ for FindingSeverity.
func shortEnumPrefix(enum string) string {
	var prefix strings.Builder
	for i, r := range enum {
		if i > 0 && unicode.IsUpper(r) {
			prefix.WriteByte('_')
		}
		prefix.WriteRune(unicode.ToUpper(r))
	}
	prefix.WriteByte('_')
	return prefix.String()
}

// writeValue prints a Go value (with json tags) as indented JSON or as YAML.
func writeValue(w io.Writer, f format, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeJSONBytes(w, f, b)
}

func writeJSONBytes(w io.Writer, f format, b []byte) error {
	if f == formatYAML {
		y, err := yaml.JSONToYAML(b)
		if err != nil {
			return err
		}
		_, err = w.Write(y)
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}

// writeStreamItem prints one message of a stream: a JSON object per line (as before cobra,
// so that line-based readers keep working) or one YAML document each, "---" first.
func writeStreamItem(w io.Writer, f format, b []byte) error {
	if f == formatYAML {
		y, err := yaml.JSONToYAML(b)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "---\n%s", y)
		return err
	}
	_, err := fmt.Fprintf(w, "%s\n", b)
	return err
}

func writeStreamProto(w io.Writer, f format, m proto.Message) error {
	b, err := protoJSON(m)
	if err != nil {
		return err
	}
	return writeStreamItem(w, f, b)
}

// timeoutContext bounds one request of a command.
func timeoutContext(cmd *cobra.Command, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), d)
}

// short is an enum value as every command prints it (tables too): ERROR, CADDY, PREFIX.
func short(e protoreflect.Enum) string {
	return fmt.Sprint(enumName(e.Descriptor(), e.Number()))
}
