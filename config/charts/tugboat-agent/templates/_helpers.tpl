{{/* Labels every object of the chart carries. */}}
{{- define "tugboat-agent.labels" -}}
app.kubernetes.io/name: tugboat-agent
app.kubernetes.io/part-of: tugboat
app.kubernetes.io/component: agent
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "tugboat-agent.selector" -}}
app.kubernetes.io/name: tugboat-agent
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "tugboat-agent.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/* The YAML documents of a generated file, decoded (comments and empty documents dropped). */}}
{{- define "tugboat-agent.documents" -}}
{{- $docs := list }}
{{- range splitList "\n---" . }}
{{- $doc := fromYaml . }}
{{- if and $doc (hasKey $doc "kind") }}
{{- $docs = append $docs $doc }}
{{- end }}
{{- end }}
{{- toJson $docs }}
{{- end }}
