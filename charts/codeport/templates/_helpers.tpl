{{/* Base name of every object. */}}
{{- define "codeport.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "codeport.labels" -}}
app.kubernetes.io/name: codeport
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: codeport
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* CRDs: `kubectl delete crd -l app.kubernetes.io/part-of=codeport` finds them. */}}
{{- define "codeport.crdLabels" -}}
{{ include "codeport.labels" . }}
app.kubernetes.io/component: crds
{{- end -}}

{{- define "codeport.selector" -}}
app.kubernetes.io/name: codeport
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "codeport.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "codeport.serviceAccountName" -}}
{{ include "codeport.fullname" . }}
{{- end -}}

{{/* Hardened container settings shared by every container. */}}
{{- define "codeport.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "codeport.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The database URL, from the existing Secret. */}}
{{- define "codeport.databaseEnv" -}}
- name: CODEPORT_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.database.existingSecret }}
      key: {{ .Values.database.secretKey }}
{{- end -}}

{{/* The codes key: the API opens codes and webhook secrets with it, the operator seals webhook secrets. */}}
{{- define "codeport.codesKeyEnv" -}}
- name: CODEPORT_CODES_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.codesKey.existingSecret }}
      key: {{ .Values.codesKey.secretKey }}
{{- end -}}

{{/* Base URL of an environment's API, written into key Secrets by the operator: publicBaseUrl,
else the chart's Ingress, else the in-cluster Service. */}}
{{- define "codeport.baseURL" -}}
{{- $api := index .root.Values.api .env -}}
{{- if $api.publicBaseUrl -}}
{{ $api.publicBaseUrl }}
{{- else if $api.ingress.enabled -}}
{{ if $api.ingress.tlsSecretName }}https{{ else }}http{{ end }}://{{ $api.ingress.host }}/v2
{{- else -}}
http://{{ include "codeport.fullname" .root }}-{{ .env }}.{{ .root.Release.Namespace }}.svc:{{ $api.service.port }}/v2
{{- end -}}
{{- end -}}

{{/* The fewest pods an API Deployment runs: its replicas, or the autoscaler's minimum. */}}
{{- define "codeport.minReplicas" -}}
{{- if .autoscaling.enabled }}{{ .autoscaling.minReplicas }}{{ else }}{{ .replicas }}{{ end -}}
{{- end -}}
