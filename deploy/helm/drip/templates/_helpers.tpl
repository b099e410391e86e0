{{/*
The chart name, truncated to the 63 characters of a DNS label.
*/}}
{{- define "drip.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every resource name. Brokers are <fullname>-<ordinal>, and a pod
name must leave room for the StatefulSet's ordinal and controller-revision
label, hence 52 rather than 63 characters.
*/}}
{{- define "drip.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Chart name and version for the helm.sh/chart label.
*/}}
{{- define "drip.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every resource.
*/}}
{{- define "drip.labels" -}}
helm.sh/chart: {{ include "drip.chart" . }}
app.kubernetes.io/name: {{ include "drip.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: drip
{{- end }}

{{/*
Labels that select the broker pods. The component label keeps the test pod
and the Services' own labels apart from the brokers.
*/}}
{{- define "drip.selectorLabels" -}}
app.kubernetes.io/name: {{ include "drip.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: broker
{{- end }}

{{/*
The headless Service that gives broker i the DNS name
<fullname>-i.<headless>.<namespace>.svc.<clusterDomain>.
*/}}
{{- define "drip.headlessName" -}}
{{- printf "%s-headless" (include "drip.fullname" .) }}
{{- end }}

{{- define "drip.topologyConfigMap" -}}
{{- printf "%s-topology" (include "drip.fullname" .) }}
{{- end }}

{{/*
The fully qualified DNS name of one broker: call with (list $ ordinal).
*/}}
{{- define "drip.brokerHost" -}}
{{- $ := index . 0 }}
{{- printf "%s-%d.%s.%s.svc.%s" (include "drip.fullname" $) (int (index . 1)) (include "drip.headlessName" $) $.Release.Namespace $.Values.clusterDomain }}
{{- end }}

{{- define "drip.mesh" -}}
{{- .Values.topology.mesh | default (include "drip.fullname" .) }}
{{- end }}

{{/*
The Secrets of the generated certificates (tls.enabled without
tls.secretName): the issuers' keys (never mounted), the brokers' key pairs
and the CAs they trust (mounted by brokers), a client's key pair and the
CA that verifies brokers (mounted by clients: the helm test, bench Jobs).
*/}}
{{- define "drip.tlsGenerated" -}}
{{- and .Values.tls.enabled (not .Values.tls.secretName) }}
{{- end }}
{{- define "drip.tlsIssuersSecret" -}}
{{- printf "%s-tls-issuers" (include "drip.fullname" .) }}
{{- end }}
{{- define "drip.tlsBrokerSecret" -}}
{{- printf "%s-broker-tls" (include "drip.fullname" .) }}
{{- end }}
{{- define "drip.tlsClientSecret" -}}
{{- printf "%s-client-tls" (include "drip.fullname" .) }}
{{- end }}

{{- define "drip.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
A link's WAN property as the topology file wants it. Helm reads YAML numbers
as floats, which print as 1e+06; bandwidth is written in whole bytes per
second instead.
*/}}
{{- define "drip.linkField" -}}
{{- $v := index . 1 }}
{{- if and (eq (index . 0) "bandwidth") (or (kindIs "float64" $v) (kindIs "int64" $v) (kindIs "int" $v)) }}
{{- printf "%dBps" (int64 $v) }}
{{- else }}
{{- $v }}
{{- end }}
{{- end }}

{{/*
One link of the topology: call with (list $ a b overrides). A field given in
overrides, even empty, replaces that of .Values.topology.link.
*/}}
{{- define "drip.link" -}}
{{- $ := index . 0 }}
{{- $a := int (index . 1) }}
{{- $b := int (index . 2) }}
{{- $over := index . 3 }}
{{- $link := dict "a" (printf "%s-%d" (include "drip.fullname" $) $a) "b" (printf "%s-%d" (include "drip.fullname" $) $b) }}
{{- range $field := list "weight" "bandwidth" "delay" "jitter" "loss" }}
{{- $v := get $.Values.topology.link $field }}
{{- if hasKey $over $field }}
{{- $v = get $over $field }}
{{- end }}
{{- if and (not (kindIs "invalid" $v)) (ne (toString $v) "") }}
{{- if eq $field "weight" }}
{{- if not (regexMatch "^[1-9][0-9]*$" (toString $v)) }}
{{- fail (printf "topology: link %d–%d: weight %v is not a positive integer" $a $b $v) }}
{{- end }}
{{- $_ := set $link "weight" (int64 $v) }}
{{- else }}
{{- $_ := set $link $field (include "drip.linkField" (list $field $v)) }}
{{- end }}
{{- end }}
{{- end }}
{{- toJson $link }}
{{- end }}

{{/*
The links of .Values.topology.shape as a JSON list of [a, b, overrides],
validated: ordinals in range, no self-links, no pair twice.
*/}}
{{- define "drip.linkPairs" -}}
{{- $n := int .Values.replicaCount }}
{{- $shape := .Values.topology.shape }}
{{- $pairs := list }}
{{- if and .Values.topology.links (ne $shape "explicit") }}
{{- fail (printf "topology.links is only for topology.shape=explicit, but shape is %q" $shape) }}
{{- end }}
{{- if eq $shape "fullmesh" }}
{{- range $a := until $n }}
{{- range $b := untilStep (add1 $a | int) $n 1 }}
{{- $pairs = append $pairs (list $a $b (dict)) }}
{{- end }}
{{- end }}
{{- else if or (eq $shape "line") (eq $shape "ring") }}
{{- range $a := until (sub $n 1 | int) }}
{{- $pairs = append $pairs (list $a (add1 $a) (dict)) }}
{{- end }}
{{- /* Closing a ring of two would link the pair twice. */}}
{{- if and (eq $shape "ring") (gt $n 2) }}
{{- $pairs = append $pairs (list (sub $n 1) 0 (dict)) }}
{{- end }}
{{- else if eq $shape "explicit" }}
{{- $seen := dict }}
{{- range $i, $l := .Values.topology.links }}
{{- if not (kindIs "map" $l) }}
{{- fail (printf "topology.links[%d]: want a map like {a: 0, b: 1}, got %v" $i $l) }}
{{- end }}
{{- if or (not (hasKey $l "a")) (not (hasKey $l "b")) }}
{{- fail (printf "topology.links[%d]: a and b (broker ordinals) are required" $i) }}
{{- end }}
{{- if not (and (regexMatch "^[0-9]+$" (toString $l.a)) (regexMatch "^[0-9]+$" (toString $l.b))) }}
{{- fail (printf "topology.links[%d]: a and b must be broker ordinals (0, 1, ...), got %v and %v" $i $l.a $l.b) }}
{{- end }}
{{- $a := int $l.a }}
{{- $b := int $l.b }}
{{- if or (lt $a 0) (ge $a $n) (lt $b 0) (ge $b $n) }}
{{- fail (printf "topology.links[%d]: %v–%v names a broker outside 0..%d (replicaCount %d)" $i $l.a $l.b (sub $n 1) $n) }}
{{- end }}
{{- if eq $a $b }}
{{- fail (printf "topology.links[%d]: links broker %d to itself" $i $a) }}
{{- end }}
{{- $key := printf "%d-%d" (min $a $b) (max $a $b) }}
{{- if hasKey $seen $key }}
{{- fail (printf "topology.links[%d]: %d–%d is already linked by topology.links[%v]" $i $a $b (get $seen $key)) }}
{{- end }}
{{- $_ := set $seen $key $i }}
{{- range $k, $_ := $l }}
{{- if not (has $k (list "a" "b" "weight" "bandwidth" "delay" "jitter" "loss")) }}
{{- fail (printf "topology.links[%d]: unknown field %q (want a, b, weight, bandwidth, delay, jitter, loss)" $i $k) }}
{{- end }}
{{- end }}
{{- $pairs = append $pairs (list $a $b (omit $l "a" "b")) }}
{{- end }}
{{- else }}
{{- fail (printf "topology.shape %q: want fullmesh, ring, line or explicit" $shape) }}
{{- end }}
{{- toJson $pairs }}
{{- end }}

{{/*
Checks of values that span templates; every template that depends on them
includes it, so the first one rendered reports the problem.
*/}}
{{- define "drip.validate" -}}
{{- if lt (int .Values.replicaCount) 1 }}
{{- fail (printf "replicaCount %v: want at least 1 broker" .Values.replicaCount) }}
{{- end }}
{{- if and .Values.tls.enabled (not .Values.tls.secretName) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" (include "drip.mesh" .))) }}
{{- fail (printf "topology.mesh %q: the generated certificates name each router as the DNS name <id>.router.<mesh>.drip.internal, so the mesh must be a DNS label (lower case letters, digits, '-'); or bring your own tls.secretName" (include "drip.mesh" .)) }}
{{- end }}
{{- if and .Values.metrics.podMonitor.enabled .Values.metrics.serviceMonitor.enabled }}
{{- fail "metrics.podMonitor.enabled and metrics.serviceMonitor.enabled are both true: enable one of them, not both; each scrapes every broker, so both would store every sample twice" }}
{{- end }}
{{- $drain := include "drip.drainTimeoutSeconds" . | int }}
{{- $overlap := include "drip.drainOverlapSeconds" . | int }}
{{- if gt (add $overlap 1) (div $drain 2) }}
{{- fail (printf "broker.drainOverlapSeconds %d does not fit broker.drainTimeoutSeconds %d: subscribers get half of the drain to move, and the overlap must leave a second of it to subscribe elsewhere; raise drainTimeoutSeconds to at least %d" $overlap $drain (mul 2 (add $overlap 1))) }}
{{- end }}
{{- $needed := add $drain 15 }}
{{- if lt (int .Values.terminationGracePeriodSeconds) (int $needed) }}
{{- fail (printf "terminationGracePeriodSeconds %d is too short for broker.drainTimeoutSeconds %d: a broker drains for up to that long after SIGTERM and then gives its client, peer and metrics servers up to 5 s each to stop, so it needs at least %d" (int .Values.terminationGracePeriodSeconds) $drain $needed) }}
{{- end }}
{{- end }}

{{/*
The topology file (internal/topology format) every broker and netem sidecar
reads: broker i is the pod <fullname>-i with router ID i, at its DNS name.
*/}}
{{- define "drip.topology" -}}
{{- include "drip.validate" . }}
{{- $n := int .Values.replicaCount }}
{{- $brokers := list }}
{{- range $i := until $n }}
{{- $host := include "drip.brokerHost" (list $ $i) }}
{{- $brokers = append $brokers (dict
  "name" (printf "%s-%d" (include "drip.fullname" $) $i)
  "id" $i
  "client" (printf "%s:%d" $host (int $.Values.ports.client))
  "peer" (printf "%s:%d" $host (int $.Values.ports.peer))
  "metrics" (printf "%s:%d" $host (int $.Values.ports.metrics))) }}
{{- end }}
{{- $links := list }}
{{- range $p := include "drip.linkPairs" . | fromJsonArray }}
{{- $links = append $links (include "drip.link" (list $ (index $p 0) (index $p 1) (index $p 2)) | fromJson) }}
{{- end }}
{{- toYaml (dict "mesh" (include "drip.mesh" .) "brokers" $brokers "links" $links) }}
{{- end }}

{{/*
The ordinals the test hook checks: the first, the middle and the last broker
(far apart in a ring or a line), or .Values.selftest.ordinals.
*/}}
{{- define "drip.selftestOrdinals" -}}
{{- include "drip.validate" . }}
{{- $n := int .Values.replicaCount }}
{{- $ords := .Values.selftest.ordinals }}
{{- if not $ords }}
{{- $ords = list 0 (div $n 2 | int) (sub $n 1 | int) | uniq }}
{{- end }}
{{- range $o := $ords }}
{{- if or (lt (int $o) 0) (ge (int $o) $n) }}
{{- fail (printf "selftest.ordinals: %v is not a broker ordinal (0..%d)" $o (sub $n 1)) }}
{{- end }}
{{- end }}
{{- toJson $ords }}
{{- end }}

{{/*
The ServiceAccount of the broker pods: the one peerDiscovery names, or the
chart's own when it reads EndpointSlices with the RBAC it creates.
*/}}
{{- define "drip.serviceAccountName" -}}
{{- .Values.peerDiscovery.serviceAccountName | default (include "drip.fullname" .) }}
{{- end }}

{{/*
Whether the chart creates the ServiceAccount, Role and RoleBinding that let
the brokers read their headless Service's EndpointSlices.
*/}}
{{- define "drip.createRBAC" -}}
{{- if and .Values.peerDiscovery.endpointSlices (not .Values.peerDiscovery.serviceAccountName) }}true{{ end }}
{{- end }}

{{/*
The drain's bounds in seconds. The defaults are the binary's, for values
that lack the keys: `helm upgrade --reuse-values` from a chart older than
them would otherwise render 0 and the broker would refuse to start.
*/}}
{{- define "drip.drainTimeoutSeconds" -}}
{{- .Values.broker.drainTimeoutSeconds | default 10 }}
{{- end }}

{{- define "drip.drainOverlapSeconds" -}}
{{- .Values.broker.drainOverlapSeconds | default 2 }}
{{- end }}
