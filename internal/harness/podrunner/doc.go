// Package podrunner is the cluster in a box's kubelet stand-in, for tests and the demo only
// (nothing that ships links it). It watches Pods, binds unscheduled ones to its Node, and runs
// each Pod's containers as processes in a network namespace of that Pod, with its own Pod IP on
// a bridge of this host, so that kube-controller-manager's EndpointSlice controller sees real
// Pods of real Deployments come, become Ready, and go.
//
// It owns: the binding of Pods to its Node, the Pods' network namespaces and addresses, the
// processes of their containers (an image maps to a binary built here; an image it cannot map
// is an ErrImagePull status, never a hang), their environment and Secret/ConfigMap/projected
// volumes, readiness and liveness probes (HTTP GET and TCP), restarts by restartPolicy, the
// Pod status a kubelet writes, and graceful termination (preStop, SIGTERM, SIGKILL after the
// grace period, then the Pod's removal).
//
// Where it differs from a kubelet, on purpose: there is no image and no root filesystem, so a
// container runs the binary its image maps to, in the Pod's directory, and a volume's files
// live under that directory; environment values and arguments that name a path under a
// volume's mountPath are rewritten to the file's real place. There are no resource limits, no
// init or ephemeral containers, no startup or exec probes, and of the kubelet's API only the
// containerLogs endpoint, which the apiserver's pods/log (kubectl logs) reaches.
package podrunner
