{{/* Labels of every object: deploy/base's part-of, and Helm's. */}}
{{- define "sluice.labels" -}}
app.kubernetes.io/part-of: sluice
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The image of a component: (dict "root" $ "name" "watcher"). */}}
{{- define "sluice.image" -}}
{{- $image := printf "sluice/%s:%s" .name (toString .root.Values.image.tag) -}}
{{- with .root.Values.image.registry -}}
{{- printf "%s/%s" (trimSuffix "/" .) $image -}}
{{- else -}}
{{- $image -}}
{{- end -}}
{{- end }}

{{/* imagePullPolicy, when set. */}}
{{- define "sluice.pullPolicy" -}}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end }}

{{/* The translator's --publish-* flag. */}}
{{- define "sluice.publishArg" -}}
{{- if .Values.publishAddresses -}}
--publish-address={{ join "," .Values.publishAddresses }}
{{- else -}}
--publish-service={{ .Values.publishService | default (printf "%s/sluice-proxy" .Release.Namespace) }}
{{- end -}}
{{- end }}

{{/* Whether to render the GatewayClass (gatewayClass.create: true, false or auto). */}}
{{- define "sluice.gatewayClass" -}}
{{- $create := toString .Values.gatewayClass.create -}}
{{- if not (has $create (list "true" "false" "auto")) -}}
{{- fail (printf "gatewayClass.create must be true, false or auto, not %q" $create) -}}
{{- end -}}
{{- if or (eq $create "true") (and (eq $create "auto") (.Capabilities.APIVersions.Has "gateway.networking.k8s.io/v1")) -}}
true
{{- end -}}
{{- end }}

{{/*
The proxies' further listeners (docs/design.md and docs/operations.md, "Gateway addresses
and ports"), as JSON {"listeners": [...]}, each with scheme, name (the listener the
translator's routes name, the pusher's --proxy-listener NAME), port (the Gateway port
clients dial), targetPort (what Caddy binds in the Pod), portName (the Service port's) and,
on an address of gateway.addresses, address and service (its Service's name). Without
gateway.addresses: one per gateway.ports entry on the shared address ("8080"). With them:
one per address and Gateway port, main ports included ("203.0.113.21:80"), and none on the
shared address, which then serves no Gateway (every Gateway has an address of the pool, or
a reserved one it asked for, or serves nothing). A reserved address (reserved: true, the
translator's --gateway-reserved-address) has its listeners and Service as a pool address
does; only the translator's flag differs.
The translator's flags, the pushers' and the Services all come from this one list, so they
cannot disagree; values they could disagree on fail the render.
*/}}
{{- define "sluice.gatewayListeners" -}}
{{- $g := .Values.gateway -}}
{{- /* The protocol of every Gateway port: the main ports are the translator's default
  --gateway-http-port and --gateway-https-port, as Service/sluice-proxy exposes them. */ -}}
{{- $protocols := dict "80" "HTTP" "443" "HTTPS" -}}
{{- range $g.ports -}}
{{- $k := toString (int .port) -}}
{{- if hasKey $protocols $k -}}
{{- fail (printf "gateway.ports: port %s is given twice, or is a main port (80 HTTP, 443 HTTPS)" $k) -}}
{{- end -}}
{{- $_ := set $protocols $k .protocol -}}
{{- end -}}
{{- $listeners := list -}}
{{- if not $g.addresses -}}
{{- range $g.ports -}}
{{- $port := int .port -}}
{{- if not (hasKey . "targetPort") -}}
{{- fail (printf "gateway.ports: port %d needs a targetPort, the port the proxy Pods bind for it" $port) -}}
{{- end -}}
{{- $listeners = append $listeners (dict "scheme" (lower .protocol) "name" (toString $port) "port" $port "targetPort" (int .targetPort) "portName" (printf "%s-%d" (lower .protocol) $port)) -}}
{{- end -}}
{{- else -}}
{{- range $g.ports -}}
{{- if hasKey . "targetPort" -}}
{{- fail (printf "gateway.ports: port %d has a targetPort, but with gateway.addresses the shared address serves no Gateway: give each address's ports their targetPorts instead" (int .port)) -}}
{{- end -}}
{{- end -}}
{{- /* The translator refuses --gateway-reserved-address without a --gateway-address. */ -}}
{{- $pool := 0 -}}
{{- range $g.addresses -}}
{{- if not .reserved -}}
{{- $pool = add1 $pool -}}
{{- end -}}
{{- end -}}
{{- if eq $pool 0 -}}
{{- fail "gateway.addresses: every address is reserved, and the translator takes reserved addresses (--gateway-reserved-address) only beside a pool (--gateway-address): give at least one address without reserved: true" -}}
{{- end -}}
{{- $seen := dict -}}
{{- range $a := $g.addresses -}}
{{- $addr := lower $a.address -}}
{{- if hasKey $seen $addr -}}
{{- fail (printf "gateway.addresses: %s is given twice" $addr) -}}
{{- end -}}
{{- $_ := set $seen $addr true -}}
{{- $svc := printf "sluice-proxy-%s" ($addr | replace "." "-" | replace ":" "-") -}}
{{- if not (regexMatch "^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$" $svc) -}}
{{- fail (printf "gateway.addresses: %s gives the Service name %s, not a DNS label" $addr $svc) -}}
{{- end -}}
{{- $host := $addr -}}
{{- if contains ":" $addr -}}
{{- $host = printf "[%s]" $addr -}}
{{- end -}}
{{- $have := dict -}}
{{- range $a.ports -}}
{{- $port := int .port -}}
{{- $k := toString $port -}}
{{- if not (hasKey $protocols $k) -}}
{{- fail (printf "gateway.addresses: %s port %d is neither 80, 443 nor one of gateway.ports" $addr $port) -}}
{{- end -}}
{{- if hasKey $have $k -}}
{{- fail (printf "gateway.addresses: %s port %d is given twice" $addr $port) -}}
{{- end -}}
{{- $_ := set $have $k true -}}
{{- $scheme := lower (get $protocols $k) -}}
{{- $portName := printf "%s-%d" $scheme $port -}}
{{- if or (eq $port 80) (eq $port 443) -}}
{{- $portName = $scheme -}}
{{- end -}}
{{- $listeners = append $listeners (dict "scheme" $scheme "name" (printf "%s:%d" $host $port) "port" $port "targetPort" (int .targetPort) "portName" $portName "address" $addr "service" $svc) -}}
{{- end -}}
{{- range $k := keys $protocols | sortAlpha -}}
{{- if not (hasKey $have $k) -}}
{{- fail (printf "gateway.addresses: %s has no targetPort for port %s: every address needs one for 80, 443 and each of gateway.ports" $addr $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* Every listener binds a port of its own in the Pod (the pusher refuses a bind address
  given twice; Caddy could not bind it). */ -}}
{{- $bound := dict "8080" "the main HTTP listener" "8443" "the main HTTPS listener" "9180" "Caddy's metrics server" "2019" "Caddy's admin API" "18020" "the pusher's gRPC" "18021" "the pusher's HTTP" -}}
{{- range $listeners -}}
{{- $k := toString .targetPort -}}
{{- if hasKey $bound $k -}}
{{- fail (printf "gateway: targetPort %s of listener %s is bound by %s already" $k .name (get $bound $k)) -}}
{{- end -}}
{{- $_ := set $bound $k (printf "listener %s" .name) -}}
{{- end -}}
{{- toJson (dict "listeners" $listeners) -}}
{{- end }}
