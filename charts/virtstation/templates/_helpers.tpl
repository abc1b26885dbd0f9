{{/* Name of the chart, or nameOverride. */}}
{{- define "virtstation.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Prefix of every object name: fullnameOverride, else the release name when it
already contains the chart name, else <release>-<chart>. Kept to 40
characters so that the longest suffix (-webhook-metrics) still fits in 63.
*/}}
{{- define "virtstation.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := include "virtstation.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "virtstation.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "virtstation.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels of one component: include with (list $ "webhook"). */}}
{{- define "virtstation.selectorLabels" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ include "virtstation.name" $ }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/* All labels of one component: include with (list $ "webhook"). */}}
{{- define "virtstation.componentLabels" -}}
{{ include "virtstation.labels" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/* Names of the objects other templates and the webhook's flags refer to. */}}
{{- define "virtstation.webhookName" -}}{{ include "virtstation.fullname" . }}-webhook{{- end }}
{{- define "virtstation.bridgeName" -}}{{ include "virtstation.fullname" . }}-bridge{{- end }}
{{- define "virtstation.webhookSecret" -}}{{ include "virtstation.fullname" . }}-webhook-tls{{- end }}
{{- define "virtstation.certsSecret" -}}{{ include "virtstation.fullname" . }}-webhook-certs{{- end }}
{{- define "virtstation.mutatingName" -}}{{ include "virtstation.fullname" . }}-mutating{{- end }}
{{- define "virtstation.validatingName" -}}{{ include "virtstation.fullname" . }}-validating{{- end }}
{{- define "virtstation.caName" -}}{{ include "virtstation.fullname" . }}-ca{{- end }}

{{/*
The Secret the bridge serves TLS from: bridge.tls.existingSecret, else the
one cert-manager issues, else "" (plain HTTP).
*/}}
{{- define "virtstation.bridgeTLSSecret" -}}
{{- if .Values.bridge.tls.enabled }}
{{- if .Values.bridge.tls.existingSecret }}
{{- .Values.bridge.tls.existingSecret }}
{{- else if .Values.certManager.enabled }}
{{- include "virtstation.fullname" . }}-bridge-tls
{{- end }}
{{- end }}
{{- end }}

{{/*
Image of one component: include with (list $ .Values.webhook.image).
<image.registry>/<repository>@<digest> when the component has a digest
(which wins over any tag), else <image.registry>/<repository>:<image.tag or
appVersion>. `make images` prints the same references.
*/}}
{{- define "virtstation.image" -}}
{{- $ := index . 0 }}
{{- $img := index . 1 }}
{{- if $img.digest }}
{{- printf "%s/%s@%s" $.Values.image.registry $img.repository $img.digest }}
{{- else }}
{{- printf "%s/%s:%s" $.Values.image.registry $img.repository (default $.Chart.AppVersion $.Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The pod securityContext of one component: the top-level podSecurityContext
with the component's podSecurityContext merged over it, key by key.
include with (list $ .Values.webhook).
*/}}
{{- define "virtstation.podSecurityContext" -}}
{{- $ := index . 0 }}
{{- toYaml (mergeOverwrite (deepCopy (default (dict) $.Values.podSecurityContext)) (deepCopy (default (dict) (index . 1).podSecurityContext))) }}
{{- end }}

{{/*
The container securityContext of one component, merged the same way from
containerSecurityContext. include with (list $ .Values.webhook).
*/}}
{{- define "virtstation.containerSecurityContext" -}}
{{- $ := index . 0 }}
{{- toYaml (mergeOverwrite (deepCopy (default (dict) $.Values.containerSecurityContext)) (deepCopy (default (dict) (index . 1).containerSecurityContext))) }}
{{- end }}

{{/*
The pod affinity of one component: its affinity value, else the generated
anti-affinity. include with (list $ "webhook" .Values.webhook).
*/}}
{{- define "virtstation.affinity" -}}
{{- $ := index . 0 }}
{{- $v := index . 2 }}
{{- if $v.affinity -}}
{{- toYaml $v.affinity }}
{{- else if eq $v.podAntiAffinity "soft" -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "virtstation.selectorLabels" (list $ (index . 1)) | nindent 12 }}
{{- else if eq $v.podAntiAffinity "hard" -}}
podAntiAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "virtstation.selectorLabels" (list $ (index . 1)) | nindent 10 }}
{{- end }}
{{- end }}

{{/* The namespaces the VM and data-disk webhooks skip. */}}
{{- define "virtstation.excludedNamespaces" -}}
{{- $ns := list "kube-system" .Release.Namespace }}
{{- range .Values.webhook.excludedNamespaces }}
{{- if not (has . $ns) }}{{ $ns = append $ns . }}{{ end }}
{{- end }}
{{- toYaml $ns }}
{{- end }}

{{/*
The matchConditions of the managed-VM webhooks: an UPDATE that changes
neither the spec nor a virtstation.io/ label or annotation (KubeVirt's
finalizer, annotation and status writes) is let through without calling the
webhook, so an outage of Virtstation never blocks KubeVirt. The same
expression as the +kubebuilder:webhook markers (test/deploy checks).
*/}}
{{- define "virtstation.vmMatchConditions" -}}
matchConditions:
  - name: spec-or-virtstation-metadata-changed
    expression: >-
      request.operation != 'UPDATE' || object.spec != oldObject.spec || object.metadata.?labels.orValue({}).exists(k, k.startsWith('virtstation.io/') && (!(k in oldObject.metadata.?labels.orValue({})) || oldObject.metadata.labels[k] != object.metadata.labels[k])) || oldObject.metadata.?labels.orValue({}).exists(k, k.startsWith('virtstation.io/') && (!(k in object.metadata.?labels.orValue({})) || object.metadata.labels[k] != oldObject.metadata.labels[k])) || object.metadata.?annotations.orValue({}).exists(k, k.startsWith('virtstation.io/') && (!(k in oldObject.metadata.?annotations.orValue({})) || oldObject.metadata.annotations[k] != object.metadata.annotations[k])) || oldObject.metadata.?annotations.orValue({}).exists(k, k.startsWith('virtstation.io/') && (!(k in object.metadata.?annotations.orValue({})) || object.metadata.annotations[k] != oldObject.metadata.annotations[k]))
{{- end }}

{{/*
A CRD the chart installs only when the cluster has none (audit reports):
include with (list $ "files/crds/<file>.yaml"). Renders the upstream file
when no CRD of that name exists, or when the one that exists belongs to
this release (meta.helm.sh/release-name and -namespace), so an upgrade
keeps the CRD the release installed. helm.sh/resource-policy: keep makes
uninstall leave it, with every tool's reports in it. `helm template` and
client-side dry runs have no cluster: lookup is empty and it renders.
*/}}
{{- define "virtstation.crdWhenMissing" -}}
{{- $ := index . 0 }}
{{- $crd := $.Files.Get (index . 1) | fromYaml }}
{{- $existing := lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" $crd.metadata.name }}
{{- $owner := dig "metadata" "annotations" "meta.helm.sh/release-name" "" $existing }}
{{- $ownerNS := dig "metadata" "annotations" "meta.helm.sh/release-namespace" "" $existing }}
{{- if or (not $existing) (and (eq $owner $.Release.Name) (eq $ownerNS $.Release.Namespace)) }}
{{- $meta := $crd.metadata }}
{{- $_ := set $meta "annotations" (merge (dict "helm.sh/resource-policy" "keep") (default (dict) $meta.annotations)) }}
{{- $_ = set $meta "labels" (merge (include "virtstation.labels" $ | fromYaml) (default (dict) $meta.labels)) }}
{{- toYaml $crd }}
{{- end }}
{{- end }}

{{/*
One ServiceMonitor endpoint: include with (list $ <metrics.secure> <tlsConfig>).
Port "metrics" of the component's -metrics Service, scheme https with
tlsConfig when secure, Prometheus's token (its own ServiceAccount's file,
or serviceMonitor.bearerTokenSecret as an authorization credential), then
serviceMonitor.endpointAdditionalProperties merged over the result.
*/}}
{{- define "virtstation.serviceMonitorEndpoint" -}}
{{- $ := index . 0 }}
{{- $sm := $.Values.serviceMonitor }}
{{- $e := dict "port" "metrics" "path" "/metrics" "interval" $sm.interval "scrapeTimeout" $sm.scrapeTimeout "honorLabels" $sm.honorLabels }}
{{- if index . 1 }}
{{- $_ := set $e "scheme" "https" }}
{{- $_ = set $e "tlsConfig" (index . 2) }}
{{- else }}
{{- $_ := set $e "scheme" "http" }}
{{- end }}
{{- if $sm.bearerTokenSecret.name }}
{{- $_ := set $e "authorization" (dict "type" "Bearer" "credentials" (dict "name" $sm.bearerTokenSecret.name "key" $sm.bearerTokenSecret.key)) }}
{{- else }}
{{- $_ := set $e "bearerTokenFile" "/var/run/secrets/kubernetes.io/serviceaccount/token" }}
{{- end }}
{{- /* A tlsConfig of the user's replaces the chart's whole: merged, it
     would keep insecureSkipVerify: true beside the user's CA. The other
     keys merge over the chart's endpoint. */}}
{{- $add := deepCopy ($sm.endpointAdditionalProperties | default dict) }}
{{- if hasKey $add "tlsConfig" }}
{{- $_ := set $e "tlsConfig" (get $add "tlsConfig") }}
{{- $_ = unset $add "tlsConfig" }}
{{- end }}
{{- toYaml (mergeOverwrite $e $add) }}
{{- end }}
