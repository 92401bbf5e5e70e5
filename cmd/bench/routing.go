package main

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"
)

// RouteStats is one load run through a Caddy: successful (200) requests per second, the
// latency of every request (successful or not), and the requests that failed.
type RouteStats struct {
	RPS      float64 `json:"rps"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	Requests int     `json:"requests"`
	Errors   int     `json:"errors"`
	// FirstError is one failure as an example, so that a run with errors says why.
	FirstError string `json:"first_error,omitempty"`
}

// Routing is the request-routing measure of one size: the same load through the Sluice
// stack's Caddy (the module) and through a stock Caddy loaded with the same config.
type Routing struct {
	Conns      int        `json:"connections"`
	DurationMs float64    `json:"duration_ms"`
	Module     RouteStats `json:"module"`
	Stock      RouteStats `json:"stock"`
}

// load sends GET / to addr from conns keep-alive clients for d, each request with the Host
// of a random one of hosts. Each client holds one connection of its own, so the load is a
// fixed concurrency rather than a fixed rate: rps is what Caddy (sharing the CPUs with the
// load generator) can answer.
func load(ctx context.Context, addr string, hosts []string, conns int, d time.Duration) RouteStats {
	if conns < 1 {
		conns = 1
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	type clientResult struct {
		lat    []float64
		ok     int
		errs   int
		errMsg string
	}
	results := make([]clientResult, conns)
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < conns; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			tr := &http.Transport{MaxIdleConns: 1, MaxIdleConnsPerHost: 1, DisableCompression: true,
				DialContext: (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext}
			defer tr.CloseIdleConnections()
			cl := &http.Client{Transport: tr, Timeout: 5 * time.Second}
			rng := rand.New(rand.NewSource(int64(c) + 1))
			res := &results[c]
			res.lat = make([]float64, 0, 4096)
			for ctx.Err() == nil {
				req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
				req.Host = hosts[rng.Intn(len(hosts))]
				t0 := time.Now()
				resp, err := cl.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				lat := ms(time.Since(t0))
				if ctx.Err() != nil && err != nil {
					break // cut off by the end of the run, not a failure
				}
				res.lat = append(res.lat, lat)
				switch {
				case err != nil:
					res.errs++
					if res.errMsg == "" {
						res.errMsg = err.Error()
					}
				case resp.StatusCode != http.StatusOK:
					res.errs++
					if res.errMsg == "" {
						res.errMsg = fmt.Sprintf("%s: status %d", req.Host, resp.StatusCode)
					}
				default:
					res.ok++
				}
			}
		}(c)
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	var st RouteStats
	var lat []float64
	ok := 0
	for _, r := range results {
		lat = append(lat, r.lat...)
		ok += r.ok
		st.Errors += r.errs
		if st.FirstError == "" {
			st.FirstError = r.errMsg
		}
	}
	st.Requests = len(lat)
	if elapsed > 0 {
		st.RPS = float64(ok) / elapsed
	}
	if len(lat) > 0 {
		sort.Float64s(lat)
		st.P50Ms, st.P99Ms = lat[int(float64(len(lat)-1)*0.5)], lat[int(float64(len(lat)-1)*0.99)]
	}
	return st
}
