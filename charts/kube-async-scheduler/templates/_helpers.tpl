{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "kas.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: <release>-<chart>, or <release> when it already holds the chart name. */}}
{{- define "kas.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kas.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kas.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kas.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kas.labels" -}}
helm.sh/chart: {{ include "kas.chart" . }}
{{ include "kas.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: scheduler
app.kubernetes.io/part-of: kube-async-scheduler
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "kas.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kas.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create=false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image reference: repository@digest, else repository:tag (tag defaults to appVersion). */}}
{{- define "kas.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
Leader election on or off, as the string "true" or "false".
"auto" (the default) means on when replicas > 1. More than one replica without leader
election is refused: two active schedulers would race to bind the same pods.
*/}}
{{- define "kas.leaderElect" -}}
{{- $v := .Values.leaderElection.enabled }}
{{- $on := false }}
{{- if kindIs "bool" $v }}
{{- $on = $v }}
{{- else }}
{{- $on = gt (int .Values.replicas) 1 }}
{{- end }}
{{- if and (not $on) (gt (int .Values.replicas) 1) }}
{{- fail (printf "replicas=%d needs leader election: set leaderElection.enabled to auto or true" (int .Values.replicas)) }}
{{- end }}
{{- $on }}
{{- end }}

{{/*
Seconds in a Go duration string (the schema's pattern: 15s, 1m30s, 500ms, 1.5h), as a float.
*/}}
{{- define "kas.seconds" -}}
{{- $units := dict "ns" 1e-9 "us" 1e-6 "µs" 1e-6 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 }}
{{- $total := 0.0 }}
{{- range $part := regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)" . -1 }}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" $part }}
{{- $unit := trimPrefix $num $part }}
{{- $total = addf $total (mulf (float64 $num) (get $units $unit)) }}
{{- end }}
{{- $total }}
{{- end }}

{{/*
The lease timings the scheduler (like client-go) refuses at start: refused here, at
install time, instead of pods that exit 2 in a crash loop after a "successful" install.
The bounds are the scheduler's own (files/config-bounds.json, generated from
scheduler/config/bounds.py by `python -m kas_dev.chart_bounds`).
*/}}
{{- define "kas.checkLeaderElection" -}}
{{- $b := .Files.Get "files/config-bounds.json" | fromJson }}
{{- $le := .Values.leaderElection }}
{{- $lease := float64 (include "kas.seconds" $le.leaseDuration) }}
{{- $renew := float64 (include "kas.seconds" $le.renewDeadline) }}
{{- $retry := float64 (include "kas.seconds" $le.retryPeriod) }}
{{- if or (le $lease 0.0) (le $renew 0.0) (le $retry 0.0) }}
{{- fail "leaderElection: leaseDuration, renewDeadline and retryPeriod must be greater than zero" }}
{{- end }}
{{- if ge $renew $lease }}
{{- fail (printf "leaderElection.renewDeadline (%s) must be less than leaseDuration (%s)" $le.renewDeadline $le.leaseDuration) }}
{{- end }}
{{- if or (lt $lease (float64 $b.minLeaseSeconds)) (gt $lease (float64 $b.maxLeaseSeconds)) }}
{{- fail (printf "leaderElection.leaseDuration (%s) must be between %vs and %vs (the Lease keeps it as whole seconds in an int32)" $le.leaseDuration $b.minLeaseSeconds (int64 $b.maxLeaseSeconds)) }}
{{- end }}
{{- if le $renew (mulf $retry $b.renewJitterFactor) }}
{{- fail (printf "leaderElection.renewDeadline (%s) must be greater than retryPeriod*%v (retryPeriod %s)" $le.renewDeadline $b.renewJitterFactor $le.retryPeriod) }}
{{- end }}
{{- end }}

{{/* Backoffs the scheduler refuses (validation.py): the longest below the first. */}}
{{- define "kas.checkBackoff" -}}
{{- $c := .Values.config }}
{{- if lt (int $c.podMaxBackoffSeconds) (int $c.podInitialBackoffSeconds) }}
{{- fail (printf "config.podMaxBackoffSeconds (%v) must be greater than or equal to config.podInitialBackoffSeconds (%v)" $c.podMaxBackoffSeconds $c.podInitialBackoffSeconds) }}
{{- end }}
{{- end }}

{{/*
The Lease name. ONE value feeds both the config's leaderElection.resourceName and the
Role's resourceNames; if they differed, the scheduler could never take the Lease and
pods would stay Pending without a word.
*/}}
{{- define "kas.leaseName" -}}
{{- default (include "kas.fullname" .) .Values.leaderElection.resourceName }}
{{- end }}

{{/* Where the config is mounted; the image's default CMD points at the same file. */}}
{{- define "kas.configDir" -}}/etc/kube-async-scheduler{{- end }}
{{- define "kas.configFile" -}}config.yaml{{- end }}

{{/* The KubeSchedulerConfiguration document, as a dict (rendered with toYaml). */}}
{{- define "kas.schedulerConfig" -}}
{{- $c := .Values.config }}
{{- $names := list }}
{{- $profiles := list }}
{{- range $i, $p := $c.profiles }}
{{- if has $p.schedulerName $names }}
{{- fail (printf "config.profiles: schedulerName %q appears more than once" $p.schedulerName) }}
{{- end }}
{{- $names = append $names $p.schedulerName }}
{{- /* DefaultPreemption args: config.preemption < profile.preemption < a DefaultPreemption
     pluginConfig entry. Key by key with set (not mergeOverwrite, which drops 0 and false). */}}
{{- $pre := deepCopy $c.preemption }}
{{- range $k, $v := ($p.preemption | default dict) }}{{- $_ := set $pre $k $v }}{{- end }}
{{- $pluginConfig := list }}
{{- range $pc := ($p.pluginConfig | default list) }}
{{- if eq $pc.name "DefaultPreemption" }}
{{- range $k, $v := ($pc.args | default dict) }}{{- $_ := set $pre $k $v }}{{- end }}
{{- else }}
{{- $pluginConfig = append $pluginConfig $pc }}
{{- end }}
{{- end }}
{{- if and (eq (int $pre.minCandidateNodesPercentage) 0) (eq (int $pre.minCandidateNodesAbsolute) 0) }}
{{- fail (printf "config.profiles[%d] (%s): minCandidateNodesPercentage and minCandidateNodesAbsolute cannot both be zero" $i $p.schedulerName) }}
{{- end }}
{{- $pluginConfig = prepend $pluginConfig (dict "name" "DefaultPreemption" "args" $pre) }}
{{- $out := dict "schedulerName" $p.schedulerName "pluginConfig" $pluginConfig }}
{{- if $p.plugins }}{{- $_ := set $out "plugins" $p.plugins }}{{- end }}
{{- if hasKey $p "percentageOfNodesToScore" }}{{- $_ := set $out "percentageOfNodesToScore" $p.percentageOfNodesToScore }}{{- end }}
{{- $profiles = append $profiles $out }}
{{- end }}
{{- if eq (include "kas.leaderElect" .) "true" }}{{- include "kas.checkLeaderElection" . }}{{- end }}
{{- include "kas.checkBackoff" . }}
{{- $le := dict
  "leaderElect" (eq (include "kas.leaderElect" .) "true")
  "leaseDuration" .Values.leaderElection.leaseDuration
  "renewDeadline" .Values.leaderElection.renewDeadline
  "retryPeriod" .Values.leaderElection.retryPeriod
  "resourceLock" "leases"
  "resourceName" (include "kas.leaseName" .)
  "resourceNamespace" .Release.Namespace }}
{{- $doc := dict
  "apiVersion" "kubescheduler.config.k8s.io/v1"
  "kind" "KubeSchedulerConfiguration"
  "percentageOfNodesToScore" $c.percentageOfNodesToScore
  "podInitialBackoffSeconds" $c.podInitialBackoffSeconds
  "podMaxBackoffSeconds" $c.podMaxBackoffSeconds
  "clientConnection" $c.clientConnection
  "leaderElection" $le
  "profiles" $profiles }}
{{- toYaml $doc }}
{{- end }}

{{/*
A probe with httpGet.host set to the probeHost value, when there is one (clusters
without a pod network: the kubelet probes a host-network pod on loopback).
Called with (list probe probeHost); returns YAML.
*/}}
{{- define "kas.probe" -}}
{{- $probe := deepCopy (index . 0) -}}
{{- $host := index . 1 -}}
{{- if and $host $probe.httpGet -}}
{{- $_ := set $probe.httpGet "host" $host -}}
{{- end -}}
{{- toYaml $probe -}}
{{- end -}}

{{/*
The Secret (kubernetes.io/tls) the scheduler serves with: server.tlsSecretName, else the
chart's own when the explain API is registered (templates/apiservice.yaml), else none
(a self-signed certificate in --cert-dir).
*/}}
{{- define "kas.servingSecret" -}}
{{- if .Values.server.tlsSecretName -}}
{{ .Values.server.tlsSecretName }}
{{- else if .Values.explainAPI.enabled -}}
{{ include "kas.fullname" . }}-serving-cert
{{- end -}}
{{- end -}}
