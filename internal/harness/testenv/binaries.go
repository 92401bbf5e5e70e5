package testenv

import "testing"

// StartBinary starts a Sluice binary (watcher, translator, pusher, sluicectl) as a process of
// the test. It is killed when the test ends, and its log is printed if the test failed.
func StartBinary(t testing.TB, name string, args ...string) *Process {
	t.Helper()
	bin, err := Binary(name)
	if err != nil {
		t.Fatal(err)
	}
	p, err := StartProcess(ProcessConfig{Name: name, Path: bin, Dir: t.TempDir(), Args: args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, p.LogTail(60))
		}
	})
	return p
}

// Addrs returns n free loopback addresses.
func Addrs(t testing.TB, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		a, err := FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = a
	}
	return out
}
