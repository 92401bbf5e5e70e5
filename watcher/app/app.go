// Package app wires the watcher process: its settings, the Kubernetes client, the informers,
// the store, the barrier and the Watch service, the status write-back, and the endpoints that
// expose them. The process is one run.Group of actors: the gRPC and ops servers, the epoch
// loop (one controller and store per decision of the served kinds), the discovery poller that
// ends an epoch, and the status writer, which follows each epoch once its barrier opened.
package app

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/client-go/dynamic"

	"github.com/sluice-io/sluice/internal/cli"
	"github.com/sluice-io/sluice/internal/grpcx"
	"github.com/sluice-io/sluice/internal/identity"
	"github.com/sluice-io/sluice/internal/run"
	watchv1 "github.com/sluice-io/sluice/proto/gen/sluice/watch/v1"
	"github.com/sluice-io/sluice/watcher/kinds"
	"github.com/sluice-io/sluice/watcher/server"
	"github.com/sluice-io/sluice/watcher/status"
)

// Run runs the watcher until ctx is done or it fails.
func (s *Settings) Run(ctx context.Context, log hclog.Logger) error {
	started := time.Now()
	plan, err := s.kindPlan()
	if err != nil {
		return err
	}
	restCfg, err := s.restConfig()
	if err != nil {
		return err
	}
	cs, err := newKubeClients(restCfg, "informers")
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("kubernetes dynamic client: %w", err)
	}
	var m *metrics // set below, before anything is served
	if err := s.TLS.CheckIdentity(identity.Identity{Role: identity.Watcher}); err != nil {
		return err
	}
	srv, err := cli.NewServing(cli.ServingConfig{Logger: log, Listen: s.Listen, HTTPListen: s.HTTPListen, TLS: s.TLS.Files(),
		Insecure: s.TLS.Insecure, Pprof: s.Pprof, MaxMessageSize: s.MaxMessageSize,
		Bounds: s.Bounds, StreamLimits: map[string]grpcx.StreamLimit{
			watchv1.WatchService_Watch_FullMethodName:         grpcx.LimitByAccess(identity.DefaultPolicy(), watchv1.WatchService_Watch_FullMethodName, s.MaxStreams, s.MaxOperatorStreams),
			watchv1.StatusService_ReportStatus_FullMethodName: grpcx.LimitByAccess(identity.DefaultPolicy(), watchv1.StatusService_ReportStatus_FullMethodName, s.MaxStreams, s.MaxOperatorStreams),
		},
		CountSent: func(method string, n int) {
			if method == watchv1.WatchService_Watch_FullMethodName {
				m.sentBytes.Add(float64(n))
			}
		}})
	if err != nil {
		return err
	}
	srv.Ops.SetNotReady("initial sync not complete")
	m = newMetrics(srv.Registry)
	watchSrv, err := server.New(server.Config{Logger: log.Named("watch"), Heartbeat: s.Heartbeat, Stopping: ctx.Done(), Metrics: m, SendTimeout: s.SendTimeout})
	if err != nil {
		return err
	}
	watchv1.RegisterWatchServiceServer(srv.GRPC.Server, watchSrv)
	srv.Ops.SetHealthCheck(servingHealth(watchSrv.Unserved, s.healthBound(), time.Now))
	peers := newPeers(log, s.TLS, s.PeerTLSServerName)
	defer peers.close()
	statusSrv, err := status.NewService(status.ServiceConfig{Logger: log.Named("status"), Dial: peers.dial, Stopping: ctx.Done()})
	if err != nil {
		return err
	}
	watchv1.RegisterStatusServiceServer(srv.GRPC.Server, statusSrv)

	hub := newEpochs()
	changes := make(chan kinds.Decision)
	var g run.Group
	srv.Add(&g)
	loop := &epochLoop{Logger: log, Settings: s, Plan: plan, Clients: cs, Dynamic: dyn, Metrics: m,
		Streams: watchSrv, Readiness: srv.Ops, Epochs: hub, Changes: changes, Started: started}
	g.Add("sync", loop.Run)
	if plan.mode == kinds.GatewayAPIAuto || len(s.OptionalKinds) > 0 {
		poller := &discoveryPoller{Logger: log.Named("discovery"), Discovery: cs.Discovery(), Plan: plan,
			Interval: s.DiscoveryInterval, Epochs: hub, Changes: changes}
		g.Add("discovery", poller.Run)
	}
	if s.StatusWrites {
		statusLog := log.Named("status")
		writer := &statusWriter{Logger: statusLog, Settings: s, Rest: restCfg, Metrics: m, Service: statusSrv}
		g.Add("status", (&statusActor{Logger: statusLog, Epochs: hub, Writer: writer}).Run)
	} else {
		log.Info("status writing is off (--status-writes=false)")
	}
	return g.Run(ctx)
}
