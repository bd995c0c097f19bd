{{/* The image of every cborgate container: values.image, the one place. */}}
{{- define "cborgate.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "cborgate.labels" -}}
app.kubernetes.io/part-of: cborgate
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "cborgate.aggregatedNamespace" -}}
{{ .Values.aggregated.namespace | default .Release.Namespace }}
{{- end -}}

{{/* config.toml for every cborgate container: the drain settings. */}}
{{- define "cborgate.config" -}}
{{- $s := .Values.shutdown -}}
{{- if le (int $s.terminationGracePeriodSeconds) (add $s.shutdownDelaySeconds $s.gracePeriodSeconds | int) -}}
{{- fail (printf "shutdown.terminationGracePeriodSeconds (%v) must exceed shutdownDelaySeconds + gracePeriodSeconds (%v): the kubelet would kill the drain" $s.terminationGracePeriodSeconds (add $s.shutdownDelaySeconds $s.gracePeriodSeconds)) -}}
{{- end -}}
[server]
# After SIGTERM: /readyz fails for shutdown_delay_seconds while requests are
# still served, then requests in flight get grace_period_seconds.
shutdown_delay_seconds = {{ $s.shutdownDelaySeconds | int }}
grace_period_seconds = {{ $s.gracePeriodSeconds | int }}
{{- end -}}

{{/* The securityContext of every cborgate container. */}}
{{- define "cborgate.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{- define "cborgate.podSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* env POD_IP, for --admin [$(POD_IP)]:9464 (the admin port has no authentication). */}}
{{- define "cborgate.podIPEnv" -}}
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
{{- end -}}

{{/* Probes on the admin port. */}}
{{- define "cborgate.probes" -}}
livenessProbe:
  httpGet:
    path: /healthz
    port: metrics
  periodSeconds: 10
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: metrics
  periodSeconds: 5
  failureThreshold: 2
{{- end -}}
