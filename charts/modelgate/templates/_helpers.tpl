{{/* Labels Helm adds to every object, beside the objects' own. */}}
{{- define "modelgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: modelgate
{{- end }}

{{/* certificates.mode, checked: a typo fails the render. */}}
{{- define "modelgate.certificatesMode" -}}
{{- $mode := .Values.certificates.mode -}}
{{- if not (has $mode (list "cert-manager" "self" "files")) -}}
{{- fail (printf "certificates.mode %q: must be one of cert-manager, self, files" $mode) -}}
{{- end -}}
{{- if and (eq $mode "files") (not .Values.certificates.files.caBundle) -}}
{{- fail "certificates.files.caBundle: required in certificates.mode files (the base64 PEM CA that signed the Secret's certificate)" -}}
{{- end -}}
{{- $mode -}}
{{- end }}

{{/* cert-manager's CA injection annotation, in cert-manager mode. */}}
{{- define "modelgate.caInjection" -}}
{{- if eq (include "modelgate.certificatesMode" .) "cert-manager" -}}
cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/modelgate-webhook
{{- end -}}
{{- end }}

{{/* A webhook clientConfig's caBundle, in files mode. */}}
{{- define "modelgate.caBundle" -}}
{{- if eq (include "modelgate.certificatesMode" .) "files" -}}
caBundle: {{ .Values.certificates.files.caBundle }}
{{- end -}}
{{- end }}

{{/* The image reference. */}}
{{- define "modelgate.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/* The Configuration: files/configuration.yaml, the values' configuration
over it, certificates.mode, the namespace and, with
webhook.clientCA.configMap, webhook.clientCAFile. */}}
{{- define "modelgate.configuration" -}}
{{- $cfg := .Files.Get "files/configuration.yaml" | fromYaml -}}
{{- $cfg = mustMergeOverwrite $cfg (deepCopy .Values.configuration) -}}
{{- $_ := set $cfg "namespace" .Release.Namespace -}}
{{- $certs := $cfg.certificates | default dict -}}
{{- $_ := set $certs "mode" (include "modelgate.certificatesMode" .) -}}
{{- $_ := set $cfg "certificates" $certs -}}
{{- if .Values.webhook.clientCA.configMap -}}
{{- $webhook := $cfg.webhook | default dict -}}
{{- $_ := set $webhook "clientCAFile" (include "modelgate.webhookClientCAFile" .) -}}
{{- $_ := set $cfg "webhook" $webhook -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end }}

{{/* Where the webhook.clientCA.configMap's bundle is mounted. */}}
{{- define "modelgate.webhookClientCADir" -}}
/etc/modelgate-webhook-client-ca
{{- end }}

{{/* The bundle's file: the Configuration's webhook.clientCAFile. */}}
{{- define "modelgate.webhookClientCAFile" -}}
{{ include "modelgate.webhookClientCADir" . }}/ca.crt
{{- end }}

{{/* The failurePolicy of the webhooks that fail open with the backstop
(webhook.FailOpenWithBackstop): Ignore when the Configuration's
policy.backstop puts the generated ValidatingAdmissionPolicies in force,
so that injection and modelgate's own judging fail open while the API
server's policies stay closed; Fail otherwise. */}}
{{- define "modelgate.workloadFailurePolicy" -}}
{{- $cfg := include "modelgate.configuration" . | fromYaml -}}
{{- if dig "policy" "backstop" false $cfg -}}Ignore{{- else -}}Fail{{- end -}}
{{- end }}
