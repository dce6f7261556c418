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

{{/* Stops the render when a value needs an API group the render does not see. helm template,
Argo CD and Flux render without a cluster and see only what --api-versions tells them: a
template that left its objects out then would install nothing and say nothing. .root: the
chart's context; .api: the group/version; .value: the value that needs it; .crds: whose CRDs
serve it; .otherwise: what to do instead. */}}
{{- define "codeport.requireAPI" -}}
{{- if not (.root.Capabilities.APIVersions.Has .api) -}}
{{- fail (printf "%s needs %s (%s) in the cluster: %s (helm template, Argo CD, Flux: pass --api-versions %s)" .value .crds .api .otherwise .api) -}}
{{- end -}}
{{- end -}}

{{/* The alert groups of a rules file of the chart (.file, e.g. files/prometheus-rules.yaml), as
JSON {"groups": [...]}, for prometheusrule.yaml. The file is the text promtool tests: each
${name} in it is replaced by .vars.name, ${runbookBaseURL} by prometheusRules.runbookBaseURL,
any other by prometheusRules.thresholds.name; a placeholder left over stops the render rather
than ship an expression Prometheus refuses. prometheusRules.alertLabels are added to every alert
(its own labels, such as severity, win). The alerts named in .without are left out. */}}
{{- define "codeport.ruleGroups" -}}
{{- $rules := .root.Values.prometheusRules }}
{{- $vars := merge (dict "runbookBaseURL" (trimSuffix "/" $rules.runbookBaseURL)) (.vars | default dict) $rules.thresholds }}
{{- $text := .root.Files.Get .file }}
{{- range $name, $value := $vars }}
{{- $text = replace (printf "${%s}" $name) (toString $value) $text }}
{{- end }}
{{- if contains "${" $text }}
{{- fail (printf "prometheusRules: %s uses a threshold that prometheusRules.thresholds lacks: %s" .file (regexFind "\\$\\{[^}]*\\}" $text)) }}
{{- end }}
{{- $groups := list }}
{{- range $group := (fromYaml $text).groups }}
{{- $kept := list }}
{{- range $rule := $group.rules }}
{{- if not (has $rule.alert ($.without | default list)) }}
{{- $_ := set $rule "labels" (merge (dict) ($rule.labels | default dict) $rules.alertLabels) }}
{{- $kept = append $kept $rule }}
{{- end }}
{{- end }}
{{- if $kept }}
{{- $groups = append $groups (set $group "rules" $kept) }}
{{- end }}
{{- end }}
{{- toJson (dict "groups" $groups) }}
{{- end -}}

{{/* The CloudNativePG Cluster of database.cnpg, its Pooler and the runtime role's Secret. */}}
{{- define "codeport.cnpgCluster" -}}
{{ include "codeport.fullname" . }}-db
{{- end -}}

{{- define "codeport.cnpgPooler" -}}
{{ include "codeport.cnpgCluster" . }}-pooler
{{- end -}}

{{- define "codeport.cnpgRuntimeSecret" -}}
{{ .Values.database.cnpg.runtimeCredentials.existingSecret | default (printf "%s-runtime" (include "codeport.cnpgCluster" .)) }}
{{- end -}}

{{/* The most pods a Deployment of . replicas runs: its replicas and the quarter, rounded up,
that a rolling update adds (maxSurge 25%). */}}
{{- define "codeport.rolloutPods" -}}
{{- $replicas := int . -}}
{{- add $replicas (div (add $replicas 3) 4) -}}
{{- end -}}

{{/* The database sessions codeport's processes may hold at once: each API pod's pool
(api.databaseMaxConns; 0 is the serving default, store.DefaultMaxConns) and each operator pod's,
for the most pods each Deployment runs (codeport.rolloutPods). */}}
{{- define "codeport.databaseSessions" -}}
{{- $perAPI := int (.Values.api.databaseMaxConns | default 20) -}}
{{- $sessions := 0 -}}
{{- range $env := list "production" "sandbox" -}}
{{- $api := index $.Values.api $env -}}
{{- if $api.enabled -}}
{{- $pods := include "codeport.rolloutPods" (ternary $api.autoscaling.maxReplicas $api.replicas $api.autoscaling.enabled) -}}
{{- $sessions = add $sessions (mul $pods $perAPI) -}}
{{- end -}}
{{- end -}}
{{- with .Values.operator -}}
{{- if .enabled -}}
{{- $sessions = add $sessions (mul (include "codeport.rolloutPods" .replicas) .databaseMaxConns) -}}
{{- end -}}
{{- end -}}
{{- $sessions -}}
{{- end -}}

{{/* The database the API and the operator use. With CloudNativePG: the runtime role (no DDL)
through the Pooler, its credentials in PGUSER and PGPASSWORD, which the PostgreSQL driver reads
when the URL names no user, so that no password is ever spelled into a URL. */}}
{{- define "codeport.databaseEnv" -}}
{{- if .Values.database.cnpg.enabled -}}
{{- $secret := include "codeport.cnpgRuntimeSecret" . -}}
{{- $host := ternary (include "codeport.cnpgPooler" .) (printf "%s-rw" (include "codeport.cnpgCluster" .)) .Values.database.cnpg.pooler.enabled -}}
- name: PGUSER
  valueFrom:
    secretKeyRef: {name: {{ $secret }}, key: username}
- name: PGPASSWORD
  valueFrom:
    secretKeyRef: {name: {{ $secret }}, key: password}
- name: CODEPORT_DATABASE_URL
  value: "postgres://{{ $host }}.{{ .Release.Namespace }}.svc:5432/codeport?sslmode=require"
{{- else -}}
- name: CODEPORT_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.database.existingSecret }}
      key: {{ .Values.database.secretKey }}
{{- end -}}
{{- end -}}

{{/* The database the migration Job uses: with CloudNativePG, the owner's URL (DDL), straight to
the primary. */}}
{{- define "codeport.migrationDatabaseEnv" -}}
{{- if .Values.database.cnpg.enabled -}}
- name: CODEPORT_DATABASE_URL
  valueFrom:
    secretKeyRef: {name: {{ include "codeport.cnpgCluster" . }}-app, key: uri}
{{- else -}}
{{ include "codeport.databaseEnv" . }}
{{- end -}}
{{- end -}}

{{/* The codes keyring: the API opens codes and webhook secrets with it, the operator seals webhook secrets. */}}
{{- define "codeport.codesKeyEnv" -}}
- name: CODEPORT_CODES_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.codesKey.existingSecret }}
      key: {{ .Values.codesKey.secretKey }}
- name: CODEPORT_CODES_CURRENT_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ .Values.codesKey.existingSecret }}
      key: {{ .Values.codesKey.currentKeyIdKey }}
      optional: true
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

{{/* A map of configuration parameters with every value a string, as PostgreSQL's and PgBouncer's
settings are in CloudNativePG: 200 becomes "200" (not "2e+02"), true "true". */}}
{{- define "codeport.stringParameters" -}}
{{- $out := dict -}}
{{- range $k, $v := . -}}
{{- if and (kindIs "float64" $v) (eq (float64 (int64 $v)) $v) -}}
{{- $_ := set $out $k (printf "%d" (int64 $v)) -}}
{{- else -}}
{{- $_ := set $out $k (toString $v) -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* A component's selector labels: the chart's and app.kubernetes.io/component. */}}
{{- define "codeport.componentSelector" -}}
{{ include "codeport.selector" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* A component's Pod metadata: its selector labels, then .values.podLabels, which may not change
them (the Deployment, its Service and its budget select the Pods by them), and
.values.podAnnotations. .path names the values in the error. */}}
{{- define "codeport.podMetadata" -}}
{{- $selector := include "codeport.componentSelector" . | fromYaml -}}
{{- range $key, $_ := .values.podLabels -}}
{{- if hasKey $selector $key -}}
{{- fail (printf "%s.podLabels may not set %s: the chart selects the Pods by it" $.path $key) -}}
{{- end -}}
{{- end -}}
labels:
  {{- toYaml (merge (dict) $selector .values.podLabels) | nindent 2 }}
{{- with .values.podAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A component's Pod placement: nodeSelector, tolerations, affinity, priorityClassName and
topologySpreadConstraints from .values. A constraint without a labelSelector counts the
component's own Pods, which is what spreading them means: with none it would count nothing. */}}
{{- define "codeport.podPlacement" -}}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .values.topologySpreadConstraints }}
{{- $selector := include "codeport.componentSelector" $ | fromYaml }}
{{- $constraints := list }}
{{- range . }}
{{- $c := deepCopy . }}
{{- if not (hasKey $c "labelSelector") }}
{{- $_ := set $c "labelSelector" (dict "matchLabels" $selector) }}
{{- end }}
{{- $constraints = append $constraints $c }}
{{- end }}
topologySpreadConstraints:
  {{- toYaml $constraints | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Where partners' webhooks may go unless networkPolicy.webhooks.to says: every public address,
as the API's own check (internal/notify) allows, or every address with
webhooks.allowPrivateNetworks. */}}
{{- define "codeport.webhookReceivers" -}}
{{- if .Values.webhooks.allowPrivateNetworks -}}
- ipBlock: {cidr: 0.0.0.0/0}
- ipBlock: {cidr: "::/0"}
{{- else -}}
- ipBlock:
    cidr: 0.0.0.0/0
    except: [0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 169.254.0.0/16, 172.16.0.0/12,
      192.0.0.0/24, 192.168.0.0/16, 198.18.0.0/15, 224.0.0.0/3]
- ipBlock:
    cidr: "::/0"
    except: ["::1/128", "64:ff9b::/96", "64:ff9b:1::/48", "fc00::/7", "fe80::/10", "ff00::/8"]
{{- end -}}
{{- end -}}
