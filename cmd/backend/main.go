// Command backend is Sluice's demo and test backend: it answers every request with its name
// and what it was asked (JSON, internal/backend), so that a request through Caddy shows where
// it went. The compose setup runs it as a container, and the cluster in a box's pod runner
// runs it for the image sluice.test/backend, configured as a Pod is: $PORT, $BACKEND_NAME and
// $POD_NAME (from the downward API) stand in for the flags.
//
// On SIGTERM it stops accepting and finishes the requests in flight, as a well-behaved
// workload does. Two switches exist for tests of the things that run it: /exit/N ends the
// process with code N when --allow-exit (or $ALLOW_EXIT) is set, and --ignore-sigterm (or
// $IGNORE_SIGTERM) makes it ignore SIGTERM, so that only SIGKILL ends it.
//
// With $TLS_CERT and $TLS_KEY (PEM, as a Pod's env can hold them) it also serves HTTPS on
// $TLS_PORT (8443), for tests of a proxy that speaks TLS to its endpoints; with $CLIENT_CA it
// asks for a client certificate that CA issued, and refuses a client that presents another.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/sluice-io/sluice/internal/backend"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "backend:", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(args []string) error {
	fs := flag.NewFlagSet("backend", flag.ContinueOnError)
	pod := os.Getenv("POD_NAME")
	name := fs.String("name", env("BACKEND_NAME", env("POD_NAME", "backend")), "the name it answers with ($BACKEND_NAME, else $POD_NAME)")
	listen := fs.String("listen", ":"+env("PORT", "8080"), "listen address (default port: $PORT)")
	allowExit := fs.Bool("allow-exit", os.Getenv("ALLOW_EXIT") != "", "serve /exit/N, which ends the process with code N ($ALLOW_EXIT)")
	ignoreTerm := fs.Bool("ignore-sigterm", os.Getenv("IGNORE_SIGTERM") != "", "ignore SIGTERM ($IGNORE_SIGTERM)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/", backend.Handler(*name, pod, nil))
	if *allowExit {
		mux.HandleFunc("/exit/{code}", func(w http.ResponseWriter, r *http.Request) {
			code, err := strconv.Atoi(r.PathValue("code"))
			if err != nil {
				http.Error(w, "exit code must be a number", http.StatusBadRequest)
				return
			}
			fmt.Printf("backend: exiting with code %d as asked\n", code)
			os.Exit(code)
		})
	}
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	tlsSrv, err := tlsServer(mux)
	if err != nil {
		return err
	}
	signals := []os.Signal{syscall.SIGTERM, os.Interrupt}
	if *ignoreTerm {
		// Notify would take SIGTERM back from Ignore: ask only for SIGINT.
		signal.Ignore(syscall.SIGTERM)
		signals = signals[1:]
	}
	ctx, stop := signal.NotifyContext(context.Background(), signals...)
	defer stop()
	errc := make(chan error, 2)
	go func() { errc <- srv.ListenAndServe() }()
	fmt.Printf("backend: %s (pod %q) listening on %s\n", *name, pod, *listen)
	if tlsSrv != nil {
		go func() { errc <- tlsSrv.ListenAndServeTLS("", "") }()
		fmt.Printf("backend: serving HTTPS on %s\n", tlsSrv.Addr)
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	fmt.Println("backend: signalled, draining")
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if tlsSrv != nil {
		_ = tlsSrv.Shutdown(shutdown)
	}
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// tlsServer is the HTTPS server $TLS_CERT and $TLS_KEY ask for, nil without them.
func tlsServer(h http.Handler) (*http.Server, error) {
	certPEM, keyPEM := os.Getenv("TLS_CERT"), os.Getenv("TLS_KEY")
	if certPEM == "" && keyPEM == "" {
		return nil, nil
	}
	pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		return nil, fmt.Errorf("$TLS_CERT and $TLS_KEY: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if ca := os.Getenv("CLIENT_CA"); ca != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(ca)) {
			return nil, errors.New("$CLIENT_CA holds no certificate")
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return &http.Server{Addr: ":" + env("TLS_PORT", "8443"), Handler: h, TLSConfig: cfg, ReadHeaderTimeout: 10 * time.Second}, nil
}
