{{/* Labels every object of the chart carries. */}}
{{- define "tugboat-hub.labels" -}}
app.kubernetes.io/name: tugboat-hub
app.kubernetes.io/part-of: tugboat
app.kubernetes.io/component: hub
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The Pods' selector. */}}
{{- define "tugboat-hub.selector" -}}
app.kubernetes.io/name: tugboat-hub
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The image reference: repository@digest, else repository:tag (default appVersion). */}}
{{- define "tugboat-hub.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/* The user name the API server gives the hub's ServiceAccount. */}}
{{- define "tugboat-hub.user" -}}
system:serviceaccount:{{ .Release.Namespace }}:tugboat-hub
{{- end }}

{{/* The receiver certificate's DNS names: the Service's, then the values'. */}}
{{- define "tugboat-hub.dnsNames" -}}
{{- $ns := .Release.Namespace -}}
{{- $names := list "tugboat-hub" (printf "tugboat-hub.%s" $ns) (printf "tugboat-hub.%s.svc" $ns) (printf "tugboat-hub.%s.svc.cluster.local" $ns) -}}
{{- concat $names .Values.receiver.tls.dnsNames | uniq | toJson -}}
{{- end }}

{{/* The port of /metrics: 8443 over HTTPS (metrics.secure), else 8080. */}}
{{- define "tugboat-hub.metricsPort" -}}
{{- if .Values.metrics.secure }}8443{{ else }}8080{{ end }}
{{- end }}
