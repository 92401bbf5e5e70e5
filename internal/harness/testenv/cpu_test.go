package testenv

import (
	"os"
	"testing"
	"time"
)

// The bench's cold-start CPU figures read /proc/PID/stat: a process that has burnt CPU
// reads more than before, and the figure is of the order of the time burnt.
func TestCPUCountsTimeSpent(t *testing.T) {
	before := CPU(os.Getpid())
	spin := time.Now()
	for x := 0; time.Since(spin) < 300*time.Millisecond; x++ {
		_ = x * x
	}
	after := CPU(os.Getpid())
	if got := after - before; got < 100*time.Millisecond || got > 10*time.Second {
		t.Fatalf("CPU after 300 ms spinning grew by %v (from %v to %v)", got, before, after)
	}
	if CPU(-1) != 0 {
		t.Fatal("CPU of no process is not 0")
	}
}
