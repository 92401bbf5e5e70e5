// Command backend is the HTTP backend of the compose setup: it answers every request with its
// name (JSON, like the test backends), so that a request through Caddy shows where it went.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"time"
)

func main() {
	name := flag.String("name", "backend", "the name it answers with")
	listen := flag.String("listen", ":8080", "listen address")
	flag.Parse()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"backend": *name, "host": r.Host, "path": r.URL.Path, "tls": r.TLS != nil})
	})
	srv := &http.Server{Addr: *listen, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
