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
