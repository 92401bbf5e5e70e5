package engine

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

func newEpoch() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "t" + time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b)
}
