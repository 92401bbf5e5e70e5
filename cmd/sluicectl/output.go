package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// writeProto prints one protobuf message as indented JSON or as YAML (its protojson form,
// so that both name the fields alike).
func writeProto(w io.Writer, f format, m proto.Message) error {
	b, err := protojson.Marshal(m)
	if err != nil {
		return err
	}
	return writeJSONBytes(w, f, b)
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
	b, err := protojson.Marshal(m)
	if err != nil {
		return err
	}
	return writeStreamItem(w, f, b)
}

// timeoutContext bounds one request of a command.
func timeoutContext(cmd *cobra.Command, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), d)
}
