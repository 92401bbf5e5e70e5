package testenv

import "testing"

// Two parts of one test never get the same port (the kernel reissues a closed listener's
// port; a pusher and its Caddy were both told one once).
func TestFreePortNeverHandsOutAPortTwice(t *testing.T) {
	seen := map[int]bool{}
	for range 1000 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}
