package main

import (
	"testing"
	"time"
)

// TestProgressLine proves the bench's progress line: while a long step runs, the line printed
// every few seconds names the stage, how far it got (when counted) and for how long.
func TestProgressLine(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 22, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name        string
		stage       string
		total, done int
		at          time.Duration
		want        string
	}{
		{"nothing started", "", 0, 0, time.Second, ""},
		{"uncounted stage", "starting etcd", 0, 0, 4 * time.Second, "bench: ... starting etcd: 4s so far\n"},
		{"counted stage", "creating the objects", 1000, 250, 7 * time.Second, "bench: ... creating the objects: 250/1000, 7s so far\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &progress{now: func() time.Time { return t0 }}
			if tc.stage != "" {
				p.step(tc.stage, tc.total)
				p.add(tc.done)
			}
			if got := p.line(t0.Add(tc.at)); got != tc.want {
				t.Errorf("line = %q, want %q", got, tc.want)
			}
		})
	}
}
