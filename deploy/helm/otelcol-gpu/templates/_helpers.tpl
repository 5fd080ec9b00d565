{{/* Names and labels. */}}
{{- define "otelcol-gpu.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "otelcol-gpu.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "otelcol-gpu.agentName" -}}
{{- printf "%s-agent" (include "otelcol-gpu.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "otelcol-gpu.gatewayName" -}}
{{- printf "%s-gateway" (include "otelcol-gpu.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The gateway's namespace (gateway.namespace, or the release namespace). */}}
{{- define "otelcol-gpu.gatewayNamespace" -}}
{{- default .Release.Namespace .Values.gateway.namespace -}}
{{- end -}}

{{/* The namespace of the workload that remote-writes: the gateway's in gateway mode. */}}
{{- define "otelcol-gpu.remoteWriteNamespace" -}}
{{- if .Values.gateway.enabled -}}
{{- include "otelcol-gpu.gatewayNamespace" . -}}
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/* Agent ↔ gateway credentials: the gateway's TLS Secret, the agents' CA ConfigMap, the token Secret (in both namespaces). */}}
{{- define "otelcol-gpu.gatewayTLSSecret" -}}
{{- default (printf "%s-tls" (include "otelcol-gpu.gatewayName" .)) .Values.gateway.tls.existingSecret -}}
{{- end -}}

{{- define "otelcol-gpu.gatewayCAConfigMap" -}}
{{- if .Values.gateway.tls.existingSecret -}}
{{- required "gateway.tls.caConfigMap is required with gateway.tls.existingSecret: the agents must verify the gateway" .Values.gateway.tls.caConfigMap -}}
{{- else -}}
{{- printf "%s-ca" (include "otelcol-gpu.gatewayName" .) -}}
{{- end -}}
{{- end -}}

{{- define "otelcol-gpu.gatewayTokenSecret" -}}
{{- default (printf "%s-token" (include "otelcol-gpu.gatewayName" .)) .Values.gateway.auth.existingSecret -}}
{{- end -}}

{{- define "otelcol-gpu.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "otelcol-gpu.agentName" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* repository@digest when image.digest is set (what runs cannot change under a tag), else repository:tag. */}}
{{- define "otelcol-gpu.image" -}}
{{- if .Values.image.digest -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" .Values.image.digest) -}}
{{- fail "image.digest must be sha256:<64 hex digits>" -}}
{{- end -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "otelcol-gpu.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "otelcol-gpu.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: otelcol-gpu
{{- end -}}

{{/* Selector labels; call with (dict "ctx" $ "component" "agent"). */}}
{{- define "otelcol-gpu.selectorLabels" -}}
app.kubernetes.io/name: {{ include "otelcol-gpu.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The Secret holding the remote-write credential. */}}
{{- define "otelcol-gpu.remoteWriteSecret" -}}
{{- default (printf "%s-remote-write" (include "otelcol-gpu.fullname" .)) .Values.remoteWrite.auth.existingSecret -}}
{{- end -}}

{{/*
Overrides merged over the agent's config (gpu_enrich switches). Empty when the values are
the defaults, so that the agent then runs configs/agent.yaml alone.
*/}}
{{- define "otelcol-gpu.attributionOverrides" -}}
{{- $enrich := dict -}}
{{- if not .Values.attribution.kubelet -}}
{{- $_ := set $enrich "kubelet" (dict "enabled" false) -}}
{{- end -}}
{{- if not .Values.attribution.processes -}}
{{- $_ := set $enrich "processes" (dict "enabled" false) -}}
{{- end -}}
{{- if $enrich -}}
{{- dict "processors" (dict "gpu_enrich" $enrich) | toYaml -}}
{{- end -}}
{{- end -}}

{{/*
Overrides merged over the config that remote-writes (the agent's, or the gateway's in
gateway mode): TLS towards the remote-write endpoint and the extra OTLP exporter.
*/}}
{{- define "otelcol-gpu.remoteWriteOverrides" -}}
{{- $exporters := dict -}}
{{- $service := dict -}}
{{- $tls := .Values.remoteWrite.tls -}}
{{- if and $tls.caSecret $tls.caConfigMap -}}
{{- fail "remoteWrite.tls: set caSecret or caConfigMap, not both" -}}
{{- end -}}
{{- if or $tls.caSecret $tls.caConfigMap $tls.insecureSkipVerify $tls.serverName -}}
{{- $t := dict "insecure_skip_verify" $tls.insecureSkipVerify -}}
{{- if or $tls.caSecret $tls.caConfigMap -}}
{{- $_ := set $t "ca_file" (printf "/etc/otelcol-gpu/remote-write-ca/%s" $tls.caKey) -}}
{{- end -}}
{{- if $tls.serverName -}}
{{- $_ := set $t "server_name_override" $tls.serverName -}}
{{- end -}}
{{- $_ := set $exporters "prometheus_remote_write" (dict "http" (dict "tls" $t)) -}}
{{- end -}}
{{- $x := .Values.extraOtlpExporter -}}
{{- if $x.enabled -}}
{{- if not $x.endpoint -}}
{{- fail "extraOtlpExporter.endpoint is required when extraOtlpExporter.enabled" -}}
{{- end -}}
{{- if not (has $x.protocol (list "grpc" "http")) -}}
{{- fail "extraOtlpExporter.protocol must be grpc or http" -}}
{{- end -}}
{{- $id := printf "otlp_%s/extra" $x.protocol -}}
{{- $cfg := dict "endpoint" $x.endpoint "compression" "gzip" -}}
{{- if $x.insecure -}}
{{- $_ := set $cfg "tls" (dict "insecure" true) -}}
{{- end -}}
{{- $_ := set $exporters $id $cfg -}}
{{- $_ := set $service "pipelines" (dict "metrics" (dict "exporters" (list "prometheus_remote_write" $id))) -}}
{{- end -}}
{{- $out := dict -}}
{{- if $exporters -}}
{{- $_ := set $out "exporters" $exporters -}}
{{- end -}}
{{- if $service -}}
{{- $_ := set $out "service" $service -}}
{{- end -}}
{{- if $out -}}
{{- $out | toYaml -}}
{{- end -}}
{{- end -}}

{{/* The auth overlay file for remote-write, or nothing. */}}
{{- define "otelcol-gpu.authFile" -}}
{{- $type := .Values.remoteWrite.auth.type -}}
{{- if eq $type "basic" -}}
remote-write-auth-basic.yaml
{{- else if eq $type "bearer" -}}
remote-write-auth-bearer.yaml
{{- else if ne $type "none" -}}
{{- fail "remoteWrite.auth.type must be none, basic or bearer" -}}
{{- end -}}
{{- end -}}

{{/* The WAL overlay for remote-write (remoteWrite.wal.enabled), or nothing. */}}
{{- define "otelcol-gpu.walFile" -}}
{{- if .Values.remoteWrite.wal.enabled -}}
remote-write-wal.yaml
{{- end -}}
{{- end -}}

{{/* Pod-spec pieces for remote-write auth and TLS: env, volumes, mounts. */}}
{{/*
Credentials never travel in clear and never sit in the URL (the exporter would log it and
label its self-metrics with it); the collector refuses both too (converter/credentialsguard).
*/}}
{{- define "otelcol-gpu.remoteWriteChecks" -}}
{{- $url := .Values.remoteWrite.url -}}
{{- /* Any '@': a password holding '/', '#' or '?' puts it past the first '/' (the collector's rule). */ -}}
{{- if contains "@" $url -}}
{{- fail "remoteWrite.url must not hold credentials (user:password@ or token@; an '@' in a path is written %40): use remoteWrite.auth with existingSecret" -}}
{{- end -}}
{{- if regexMatch "(?i)[?&]([^=&#]*(auth|token|key|secret|passw|credential|cookie|session|signature)[^=&#]*|sig|pwd)=" $url -}}
{{- fail "remoteWrite.url must not carry a secret in its query (api_key=, token=, sig=…): use remoteWrite.auth with existingSecret" -}}
{{- end -}}
{{- if and (ne .Values.remoteWrite.auth.type "none") (hasPrefix "http://" (lower $url)) (not .Values.remoteWrite.auth.allowPlaintext) -}}
{{- fail "remoteWrite.auth over http:// sends the credential in clear: use an https:// URL (remoteWrite.tls for its CA), or set remoteWrite.auth.allowPlaintext=true where the path cannot be read" -}}
{{- end -}}
{{- end -}}

{{- define "otelcol-gpu.remoteWriteEnv" -}}
{{- include "otelcol-gpu.remoteWriteChecks" . -}}
{{- if .Values.remoteWrite.auth.allowPlaintext }}
- name: OTELCOL_GPU_ALLOW_PLAINTEXT_CREDENTIALS
  value: "true"
{{- end }}
{{- if eq .Values.remoteWrite.auth.type "basic" }}
- name: REMOTE_WRITE_BASIC_AUTH
  valueFrom:
    secretKeyRef:
      name: {{ include "otelcol-gpu.remoteWriteSecret" . }}
      key: {{ .Values.remoteWrite.auth.basicAuthKey }}
{{- else if eq .Values.remoteWrite.auth.type "bearer" }}
- name: REMOTE_WRITE_BEARER_TOKEN_FILE
  value: /etc/otelcol-gpu/auth/token
{{- end }}
{{- end -}}

{{- define "otelcol-gpu.remoteWriteVolumes" -}}
{{- if eq .Values.remoteWrite.auth.type "bearer" }}
- name: remote-write-token
  secret:
    secretName: {{ include "otelcol-gpu.remoteWriteSecret" . }}
    defaultMode: 0440 # owner and group (fsGroup) only
    items:
      - key: {{ .Values.remoteWrite.auth.tokenKey }}
        path: token
{{- end }}
{{- with .Values.remoteWrite.tls }}
{{- if .caSecret }}
- name: remote-write-ca
  secret:
    secretName: {{ .caSecret }}
    defaultMode: 0440 # owner and group (fsGroup) only
    items:
      - key: {{ .caKey }}
        path: {{ .caKey }}
{{- else if .caConfigMap }}
- name: remote-write-ca
  configMap:
    name: {{ .caConfigMap }}
    items:
      - key: {{ .caKey }}
        path: {{ .caKey }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "otelcol-gpu.remoteWriteMounts" -}}
{{- if eq .Values.remoteWrite.auth.type "bearer" }}
- name: remote-write-token
  mountPath: /etc/otelcol-gpu/auth
  readOnly: true
{{- end }}
{{- if or .Values.remoteWrite.tls.caSecret .Values.remoteWrite.tls.caConfigMap }}
- name: remote-write-ca
  mountPath: /etc/otelcol-gpu/remote-write-ca
  readOnly: true
{{- end }}
{{- end -}}

{{/* The agent's config files, in --config order (later files override earlier ones). */}}
{{- define "otelcol-gpu.agentBaseFile" -}}
{{- if .Values.gateway.enabled -}}agent-to-gateway.yaml{{- else -}}agent.yaml{{- end -}}
{{- end -}}

{{- define "otelcol-gpu.agentOverrides" -}}
{{- $over := include "otelcol-gpu.attributionOverrides" . | fromYaml -}}
{{- if not .Values.gateway.enabled -}}
{{- $over = mustMergeOverwrite $over (include "otelcol-gpu.remoteWriteOverrides" . | fromYaml) -}}
{{- end -}}
{{- if $over -}}
{{- toYaml $over -}}
{{- end -}}
{{- end -}}

{{- define "otelcol-gpu.agentConfigFiles" -}}
{{- $files := list (include "otelcol-gpu.agentBaseFile" .) -}}
{{- /* k8s_attributes' extract.labels, the base's and the pool's (agent.nodePoolLabel). */ -}}
{{- if .Values.agent.nodePoolLabel -}}
{{- $files = append $files "node-pool.yaml" -}}
{{- end -}}
{{- /* The WAL overlay sets the pipeline's exporters; overrides.yaml, after it, may list more. */ -}}
{{- if and (not .Values.gateway.enabled) (include "otelcol-gpu.walFile" .) -}}
{{- $files = append $files (include "otelcol-gpu.walFile" .) -}}
{{- end -}}
{{- if include "otelcol-gpu.agentOverrides" . -}}
{{- $files = append $files "overrides.yaml" -}}
{{- end -}}
{{- if and (not .Values.gateway.enabled) (include "otelcol-gpu.authFile" .) -}}
{{- $files = append $files (include "otelcol-gpu.authFile" .) -}}
{{- end -}}
{{- toJson $files -}}
{{- end -}}

{{/* The gateway's config files, in --config order. */}}
{{- define "otelcol-gpu.gatewayConfigFiles" -}}
{{- $files := list "gateway.yaml" -}}
{{- if include "otelcol-gpu.walFile" . -}}
{{- $files = append $files (include "otelcol-gpu.walFile" .) -}}
{{- end -}}
{{- if include "otelcol-gpu.remoteWriteOverrides" . -}}
{{- $files = append $files "overrides.yaml" -}}
{{- end -}}
{{- $auth := include "otelcol-gpu.authFile" . -}}
{{- if eq $auth "remote-write-auth-bearer.yaml" -}}
{{- /* The gateway's variant keeps bearertokenauth/agents in the extension list. */ -}}
{{- $auth = "remote-write-auth-bearer-gateway.yaml" -}}
{{- end -}}
{{- if $auth -}}
{{- $files = append $files $auth -}}
{{- end -}}
{{- if include "otelcol-gpu.agentIdentity" . -}}
{{- $files = append $files "gateway-agent-identity.yaml" -}}
{{- /* Lists are replaced when configs merge: the identity overlay's extension list drops
bearertokenauth/remote_write, the bearer overlay's drops oidc/agents. The last file lists
all of them. */ -}}
{{- if eq $auth "remote-write-auth-bearer-gateway.yaml" -}}
{{- $files = append $files "gateway-agent-identity-remote-write-bearer.yaml" -}}
{{- end -}}
{{- end -}}
{{- toJson $files -}}
{{- end -}}

{{/*
"true" when the agents present their pods' ServiceAccount tokens to the gateway
(gateway.agentIdentity.enabled, deploy/config-overlays/gateway-agent-identity.yaml), after
checking its values; empty otherwise (the shared token).
*/}}
{{- define "otelcol-gpu.agentIdentity" -}}
{{- $id := .Values.gateway.agentIdentity -}}
{{- if $id.enabled -}}
{{- if not .Values.gateway.enabled -}}
{{- fail "gateway.agentIdentity.enabled needs gateway.enabled: it is how the agents authenticate to the gateway" -}}
{{- end -}}
{{- if not $id.issuerURL -}}
{{- fail "gateway.agentIdentity.issuerURL is required with gateway.agentIdentity.enabled: the cluster's service-account issuer, as `kubectl get --raw /.well-known/openid-configuration` prints it (\"issuer\"), e.g. https://kubernetes.default.svc.cluster.local or https://oidc.eks.<region>.amazonaws.com/id/<id>" -}}
{{- end -}}
{{- if not (hasPrefix "https://" $id.issuerURL) -}}
{{- fail "gateway.agentIdentity.issuerURL must be an https:// URL (the issuer the cluster writes into its tokens)" -}}
{{- end -}}
{{- if not $id.audience -}}
{{- fail "gateway.agentIdentity.audience must not be empty" -}}
{{- end -}}
{{- if not (has $id.issuerCA (list "kube-root-ca" "system")) -}}
{{- fail "gateway.agentIdentity.issuerCA must be kube-root-ca (the API server's CA) or system (a public issuer's certificate: EKS, GKE, AKS)" -}}
{{- end -}}
{{- if .Values.gateway.auth.existingSecret -}}
{{- fail "gateway.auth.existingSecret is the shared agents' token, which gateway.agentIdentity replaces: unset one of them" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}

{{/* The agents' ServiceAccount as the gateway matches the token's subject: a regular
expression over the whole subject, dots escaped. */}}
{{- define "otelcol-gpu.agentSubject" -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "otelcol-gpu.serviceAccountName" .) | regexQuoteMeta -}}
{{- end -}}

{{/* Egress rules for one destination list ({cidr, port} or {namespace, podLabels, port}). */}}
{{- define "otelcol-gpu.egressTo" -}}
{{- range . }}
- to:
    {{- if hasKey . "cidr" }}
    - ipBlock:
        cidr: {{ .cidr }}
    {{- else }}
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: {{ required "networkPolicy.egress: an entry needs cidr or namespace" (get . "namespace") }}
      {{- with (get . "podLabels") }}
      podSelector:
        matchLabels:
          {{- toYaml . | nindent 10 }}
      {{- end }}
    {{- end }}
  ports:
    - port: {{ required "networkPolicy.egress: an entry needs a port" (get . "port") }}
      protocol: TCP
{{- end }}
{{- end -}}

{{/* DNS, always first in an egress list. */}}
{{- define "otelcol-gpu.egressDNS" -}}
{{- $dns := .Values.networkPolicy.egress.dns -}}
- to:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: {{ $dns.namespace }}
      {{- with $dns.podLabels }}
      podSelector:
        matchLabels:
          {{- toYaml . | nindent 10 }}
      {{- end }}
  ports:
    - port: 53
      protocol: UDP
    - port: 53
      protocol: TCP
{{- end -}}
