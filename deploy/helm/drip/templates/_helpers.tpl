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
This release's site values with their defaults, as JSON: values of a release
made by a chart older than them (helm upgrade --reuse-values) lack the keys.
*/}}
{{- define "drip.site" -}}
{{- $s := .Values.site | default dict }}
{{- toJson (dict "name" ($s.name | default "") "peerService" ($s.peerService | default dict)
  "remotePeers" ($s.remotePeers | default list) "remoteLink" ($s.remoteLink | default dict)) }}
{{- end }}

{{/*
This release's site, or "" for a single-site release.
*/}}
{{- define "drip.siteName" -}}
{{- (.Values.site | default dict).name | default "" }}
{{- end }}

{{/*
The sites of a mesh across clusters, validated: a JSON object with "sites",
every site as {name, base, size}, and "mine", this release's site, or {}
for a single-site release. Ranges of router IDs must not overlap, and this
site's brokers must fit its range.
*/}}
{{- define "drip.sites" -}}
{{- $name := include "drip.siteName" . }}
{{- $list := .Values.sites | default list }}
{{- if and $list (not $name) }}
{{- fail "sites lists the sites of a mesh across clusters, but site.name is empty: set it to this release's site" }}
{{- end }}
{{- $sites := list }}
{{- $mine := dict }}
{{- if $name }}
{{- if not $list }}
{{- fail (printf "site.name %q: sites must list every site of the mesh with its router-ID range (the same list in every site's values)" $name) }}
{{- end }}
{{- range $i, $s := $list }}
{{- if not (kindIs "map" $s) }}
{{- fail (printf "sites[%d]: want a map like {name: eu, routerIdBase: 0, routerIds: 16}, got %v" $i $s) }}
{{- end }}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" (toString ($s.name | default ""))) }}
{{- fail (printf "sites[%d]: name %q is not a DNS label (lower case letters, digits, '-')" $i ($s.name | default "")) }}
{{- end }}
{{- if not (and (regexMatch "^[0-9]+$" (toString ($s.routerIdBase | default 0))) (regexMatch "^[1-9][0-9]*$" (toString ($s.routerIds | default 0)))) }}
{{- fail (printf "sites[%d] %s: routerIdBase (a router ID, 0 or more) and routerIds (how many IDs, 1 or more) are required" $i $s.name) }}
{{- end }}
{{- $base := int64 $s.routerIdBase }}
{{- $size := int64 $s.routerIds }}
{{- if gt (add $base $size) 65536 }}
{{- fail (printf "sites[%d] %s: routers %d–%d go beyond 65535, the largest router ID a mesh admits" $i $s.name $base (sub (add $base $size) 1)) }}
{{- end }}
{{- range $o := $sites }}
{{- if eq $o.name $s.name }}
{{- fail (printf "sites[%d]: site %s is listed twice" $i $s.name) }}
{{- end }}
{{- if and (lt (int64 $o.base) (add $base $size)) (lt $base (add (int64 $o.base) (int64 $o.size))) }}
{{- fail (printf "sites: %s (routers %d–%d) and %s (routers %d–%d) overlap: every router ID belongs to one site" $o.name (int64 $o.base) (sub (add (int64 $o.base) (int64 $o.size)) 1) $s.name $base (sub (add $base $size) 1)) }}
{{- end }}
{{- end }}
{{- $entry := dict "name" $s.name "base" $base "size" $size }}
{{- $sites = append $sites $entry }}
{{- if eq $s.name $name }}
{{- $mine = $entry }}
{{- end }}
{{- end }}
{{- if not $mine }}
{{- fail (printf "site.name %q is not one of sites (%s)" $name (include "drip.siteRanges" $sites)) }}
{{- end }}
{{- if gt (int64 .Values.replicaCount) (int64 $mine.size) }}
{{- fail (printf "replicaCount %d does not fit site %s's %d router IDs (%d–%d): give the site a larger routerIds in sites" (int64 .Values.replicaCount) $name (int64 $mine.size) (int64 $mine.base) (sub (add (int64 $mine.base) (int64 $mine.size)) 1)) }}
{{- end }}
{{- end }}
{{- toJson (dict "sites" $sites "mine" $mine) }}
{{- end }}

{{/*
Sites' ranges for messages: "eu 0–15, us 16–31".
*/}}
{{- define "drip.siteRanges" -}}
{{- $out := list }}
{{- range $s := . }}
{{- $out = append $out (printf "%s %d–%d" $s.name (int64 $s.base) (sub (add (int64 $s.base) (int64 $s.size)) 1)) }}
{{- end }}
{{- join ", " $out }}
{{- end }}

{{/*
The router ID of broker 0: its site's routerIdBase, or 0.
*/}}
{{- define "drip.routerIdBase" -}}
{{- $mine := (include "drip.sites" . | fromJson).mine }}
{{- if $mine }}{{ int64 $mine.base }}{{ else }}0{{ end }}
{{- end }}

{{/*
Broker i's name in the topology, logs and metrics: call with (list $ i).
In a site of a mesh across clusters it is <site>/<pod>, so that a link
names the site at its other end.
*/}}
{{- define "drip.brokerName" -}}
{{- $ := index . 0 }}
{{- $pod := printf "%s-%d" (include "drip.fullname" $) (int (index . 1)) }}
{{- with include "drip.siteName" $ }}{{ printf "%s/%s" . $pod }}{{ else }}{{ $pod }}{{ end }}
{{- end }}

{{/*
The names of this release's brokers, as a JSON list.
*/}}
{{- define "drip.brokerNames" -}}
{{- $out := list }}
{{- range $i := until (int .Values.replicaCount) }}
{{- $out = append $out (include "drip.brokerName" (list $ $i)) }}
{{- end }}
{{- toJson $out }}
{{- end }}

{{/*
The --name argument of the broker and the netem sidecar: the pod's name,
prefixed with the site.
*/}}
{{- define "drip.nameArg" -}}
{{- with include "drip.siteName" . }}{{ printf "%s/$(POD_NAME)" . }}{{ else }}$(POD_NAME){{ end }}
{{- end }}

{{/*
Broker i's external peer address ("host:port", site.peerService.addresses),
or "": call with (list $ i).
*/}}
{{- define "drip.peerAddress" -}}
{{- $ := index . 0 }}
{{- $addrs := (include "drip.site" $ | fromJson).peerService.addresses | default list }}
{{- if lt (int (index . 1)) (len $addrs) }}{{ index $addrs (int (index . 1)) }}{{ end }}
{{- end }}

{{/*
The host of a "host:port" address, without an IPv6 literal's brackets.
*/}}
{{- define "drip.addressHost" -}}
{{- regexReplaceAll "^\\[?(.*?)\\]?:[0-9]+$" . "${1}" }}
{{- end }}

{{/*
The names broker i's certificate holds, as JSON {"dns": [...], "ips": [...]}:
its pod's DNS names, the client Service's, the router's DNS SAN
<id>.router.<mesh>.drip.internal, and the hosts by which it is reached from
outside the cluster (its peer address, service.externalHosts). Call with
(list $ i).
*/}}
{{- define "drip.brokerCertNames" -}}
{{- $ := index . 0 }}
{{- $i := int (index . 1) }}
{{- $host := include "drip.brokerHost" (list $ $i) }}
{{- $svc := include "drip.fullname" $ }}
{{- $ns := $.Release.Namespace }}
{{- $id := add (include "drip.routerIdBase" $ | int64) $i }}
{{- $dns := list $host (trimSuffix (printf ".%s" $.Values.clusterDomain) $host)
    $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns $.Values.clusterDomain)
    (printf "%d.router.%s.drip.internal" $id (include "drip.mesh" $)) }}
{{- $ips := list }}
{{- $external := $.Values.service.externalHosts | default list }}
{{- with include "drip.peerAddress" (list $ $i) }}
{{- $external = prepend $external (include "drip.addressHost" .) }}
{{- end }}
{{- range $h := $external }}
{{- if regexMatch "^[0-9.]+$|:" $h }}
{{- $ips = append $ips $h }}
{{- else }}
{{- $dns = append $dns $h }}
{{- end }}
{{- end }}
{{- toJson (dict "dns" ($dns | uniq) "ips" ($ips | uniq)) }}
{{- end }}

{{/*
How the brokers get their certificates: off, secret (tls.secretName, one
for all), generated (the chart's own CAs), meshCA (the chart signs with CAs
from Secrets the sites share) or certManager (Certificates from
tls.meshCA.issuerRef). The last three give every broker a certificate
naming its router, mounted at /etc/drip-tls.
*/}}
{{- define "drip.tlsMode" -}}
{{- $ca := .Values.tls.meshCA | default dict }}
{{- if not .Values.tls.enabled }}off
{{- else if .Values.tls.secretName }}secret
{{- else if $ca.secretName }}meshCA
{{- else if $ca.issuerRef }}certManager
{{- else }}generated
{{- end }}
{{- end }}

{{/*
Whether the brokers run with a certificate of their own naming their
router (and --tls-peer-identity, --tls-client-ca).
*/}}
{{- define "drip.tlsPerBroker" -}}
{{- if has (include "drip.tlsMode" .) (list "generated" "meshCA" "certManager") }}true{{ end }}
{{- end }}

{{/*
The Secrets of the generated certificates (tls.enabled without
tls.secretName): the issuers' keys (never mounted), the brokers' key pairs
and the CAs they trust (mounted by brokers), a client's key pair and the
CA that verifies brokers (mounted by clients: the helm test, bench Jobs).
*/}}
{{- define "drip.tlsGenerated" -}}
{{- has (include "drip.tlsMode" .) (list "generated" "meshCA") }}
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

{{/*
The Secret cert-manager writes broker i's certificate to: call with (list $ i).
*/}}
{{- define "drip.certManagerSecret" -}}
{{- printf "%s-%d-tls" (include "drip.fullname" (index . 0)) (int (index . 1)) }}
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
One link of the topology between brokers a and b of this release: call with
(list $ a b overrides). A field given in overrides, even empty, replaces
that of .Values.topology.link.
*/}}
{{- define "drip.link" -}}
{{- $ := index . 0 }}
{{- $a := int (index . 1) }}
{{- $b := int (index . 2) }}
{{- include "drip.linkSpec" (list $ (include "drip.brokerName" (list $ $a)) (include "drip.brokerName" (list $ $b)) $.Values.topology.link (index . 3) (printf "topology: link %d–%d" $a $b)) }}
{{- end }}

{{/*
A link of the topology as JSON: call with (list $ aName bName defaults
overrides what); a field given in overrides, even empty, replaces that of
defaults, and what names the link in errors.
*/}}
{{- define "drip.linkSpec" -}}
{{- $defaults := index . 3 | default dict }}
{{- $over := index . 4 }}
{{- $what := index . 5 }}
{{- $link := dict "a" (index . 1) "b" (index . 2) }}
{{- range $field := list "weight" "bandwidth" "delay" "jitter" "loss" }}
{{- $v := get $defaults $field }}
{{- if hasKey $over $field }}
{{- $v = get $over $field }}
{{- end }}
{{- if and (not (kindIs "invalid" $v)) (ne (toString $v) "") }}
{{- if eq $field "weight" }}
{{- if not (regexMatch "^[1-9][0-9]*$" (toString $v)) }}
{{- fail (printf "%s: weight %v is not a positive integer" $what $v) }}
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
The remote peers of a site (site.remotePeers), validated, as a JSON list of
{name, id, address, brokers, index, overrides}: each needs an address and a
router ID in another site's range, and links to brokers of this release.
*/}}
{{- define "drip.remotePeers" -}}
{{- $peers := (include "drip.site" . | fromJson).remotePeers }}
{{- $out := list }}
{{- if $peers }}
{{- $sites := include "drip.sites" . | fromJson }}
{{- if not (include "drip.siteName" .) }}
{{- fail "site.remotePeers needs site.name and sites: a remote peer is a broker of another site, whose router-ID range sites gives" }}
{{- end }}
{{- $mine := $sites.mine }}
{{- $n := int .Values.replicaCount }}
{{- $ids := dict }}
{{- $names := dict }}
{{- range $i, $p := $peers }}
{{- if not (kindIs "map" $p) }}
{{- fail (printf "site.remotePeers[%d]: want a map like {id: 16, address: \"198.51.100.7:31100\"}, got %v" $i $p) }}
{{- end }}
{{- range $k, $_ := $p }}
{{- if not (has $k (list "id" "address" "name" "brokers" "weight" "bandwidth" "delay" "jitter" "loss")) }}
{{- fail (printf "site.remotePeers[%d]: unknown field %q (want id, address, name, brokers, weight, bandwidth, delay, jitter, loss)" $i $k) }}
{{- end }}
{{- end }}
{{- if not (and (hasKey $p "id") (regexMatch "^[0-9]+$" (toString $p.id))) }}
{{- fail (printf "site.remotePeers[%d]: id, the remote broker's router ID, is required (a number)" $i) }}
{{- end }}
{{- $id := int64 $p.id }}
{{- $address := get $p "address" | default "" | toString }}
{{- if not $address }}
{{- fail (printf "site.remotePeers[%d] (router %d): address is required: the \"host:port\" at which its site exposes its peer port (that site's site.peerService.addresses)" $i $id) }}
{{- end }}
{{- if not (regexMatch "^([^:\\[\\]]+|\\[[0-9a-fA-F:.]+\\]):[0-9]+$" $address) }}
{{- fail (printf "site.remotePeers[%d] (router %d): address %q is not \"host:port\"" $i $id $address) }}
{{- end }}
{{- if and (ge $id (int64 $mine.base)) (lt $id (add (int64 $mine.base) (int64 $mine.size))) }}
{{- fail (printf "site.remotePeers[%d]: router ID %d is inside this site's own range (%s %d–%d): a remote peer is a broker of another site" $i $id $mine.name (int64 $mine.base) (sub (add (int64 $mine.base) (int64 $mine.size)) 1)) }}
{{- end }}
{{- $site := dict }}
{{- range $s := $sites.sites }}
{{- if and (ge $id (int64 $s.base)) (lt $id (add (int64 $s.base) (int64 $s.size))) }}
{{- $site = $s }}
{{- end }}
{{- end }}
{{- if not $site }}
{{- fail (printf "site.remotePeers[%d]: router ID %d is in no site's range (%s)" $i $id (include "drip.siteRanges" $sites.sites)) }}
{{- end }}
{{- if hasKey $ids (toString $id) }}
{{- fail (printf "site.remotePeers[%d]: router %d is already listed as site.remotePeers[%v]; list its links in one entry's brokers" $i $id (get $ids (toString $id))) }}
{{- end }}
{{- $_ := set $ids (toString $id) $i }}
{{- $brokers := get $p "brokers" | default (list 0) }}
{{- range $b := $brokers }}
{{- if or (not (regexMatch "^[0-9]+$" (toString $b))) (ge (int $b) $n) }}
{{- fail (printf "site.remotePeers[%d] (router %d): brokers: %v is not a broker ordinal of this site (0..%d)" $i $id $b (sub $n 1)) }}
{{- end }}
{{- end }}
{{- $name := get $p "name" | default (printf "%s/%s-%d" $site.name (include "drip.fullname" $) (sub $id (int64 $site.base))) }}
{{- if or (hasKey $names $name) (has $name (include "drip.brokerNames" $ | fromJsonArray)) }}
{{- fail (printf "site.remotePeers[%d] (router %d): name %q is another broker's: every broker of the mesh needs a name of its own" $i $id $name) }}
{{- end }}
{{- $_ := set $names $name $i }}
{{- $out = append $out (dict "name" $name "id" $id "address" $address "brokers" $brokers "index" $i "overrides" (omit $p "id" "address" "name" "brokers")) }}
{{- end }}
{{- end }}
{{- toJson $out }}
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
{{- $_ := include "drip.sites" . }}
{{- $_ = include "drip.remotePeers" . }}
{{- include "drip.validateSite" . }}
{{- include "drip.validateTLS" . }}
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
{{- $base := include "drip.routerIdBase" . | int64 }}
{{- $brokers := list }}
{{- range $i := until $n }}
{{- $host := include "drip.brokerHost" (list $ $i) }}
{{- $brokers = append $brokers (dict
  "name" (include "drip.brokerName" (list $ $i))
  "id" (add $base $i)
  "client" (printf "%s:%d" $host (int $.Values.ports.client))
  "peer" (printf "%s:%d" $host (int $.Values.ports.peer))
  "metrics" (printf "%s:%d" $host (int $.Values.ports.metrics))) }}
{{- end }}
{{- $links := list }}
{{- range $p := include "drip.linkPairs" . | fromJsonArray }}
{{- $links = append $links (include "drip.link" (list $ (index $p 0) (index $p 1) (index $p 2)) | fromJson) }}
{{- end }}
{{- /* Brokers of other sites, at their external addresses only, and the links to them. */}}
{{- range $r := include "drip.remotePeers" . | fromJsonArray }}
{{- $brokers = append $brokers (dict "name" $r.name "id" (int64 $r.id) "peer" $r.address) }}
{{- range $b := $r.brokers }}
{{- $links = append $links (include "drip.linkSpec" (list $ (include "drip.brokerName" (list $ $b)) $r.name (include "drip.site" $ | fromJson).remoteLink $r.overrides (printf "site.remotePeers[%d]" (int $r.index))) | fromJson) }}
{{- end }}
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

{{/*
Checks of a site of a mesh across clusters: a mesh name the sites share, and
an external peer address per broker.
*/}}
{{- define "drip.validateSite" -}}
{{- if and .Values.service.nodePort (not (has .Values.service.type (list "NodePort" "LoadBalancer"))) }}
{{- fail (printf "service.nodePort %d needs service.type NodePort or LoadBalancer, not %s" (int .Values.service.nodePort) .Values.service.type) }}
{{- end }}
{{- $site := include "drip.siteName" . }}
{{- $ps := (include "drip.site" . | fromJson).peerService }}
{{- $addrs := $ps.addresses | default list }}
{{- if $site }}
{{- if not .Values.topology.mesh }}
{{- fail (printf "site.name %q: topology.mesh is required in a mesh across clusters, the same name at every site (brokers link only within one mesh, and the default, the release's fullname, is not the other sites')" $site) }}
{{- end }}
{{- if lt (len $addrs) (int .Values.replicaCount) }}
{{- fail (printf "site.peerService.addresses: %d for %d brokers: every broker needs the \"host:port\" at which other sites dial it" (len $addrs) (int .Values.replicaCount)) }}
{{- end }}
{{- if and (eq ($ps.type | default "") "ClusterIP") (not $ps.externalIPs) }}
{{- fail "site.peerService.type ClusterIP: other sites reach the brokers only at external IPs; set site.peerService.externalIPs, or use NodePort or LoadBalancer" }}
{{- end }}
{{- else if $addrs }}
{{- fail "site.peerService.addresses is set but site.name is empty: the per-broker peer Services are for a site of a mesh across clusters" }}
{{- end }}
{{- range $i, $a := $addrs }}
{{- if not (regexMatch "^([^:\\[\\]]+|\\[[0-9a-fA-F:.]+\\]):[0-9]+$" (toString $a)) }}
{{- fail (printf "site.peerService.addresses[%d]: %q is not \"host:port\"" $i $a) }}
{{- end }}
{{- if and $ps.externalIPs (not (regexMatch "^[0-9.]+$|:" (include "drip.addressHost" $a))) }}
{{- fail (printf "site.peerService.addresses[%d]: %q: with externalIPs the host must be an IP address" $i $a) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Checks of the TLS values: one source of certificates, and a shared CA for
a site of a mesh across clusters.
*/}}
{{- define "drip.validateTLS" -}}
{{- $ca := .Values.tls.meshCA | default dict }}
{{- if .Values.tls.enabled }}
{{- if and $ca.secretName $ca.issuerRef }}
{{- fail "tls.meshCA.secretName and tls.meshCA.issuerRef are both set: the chart signs the brokers' certificates with the CA of the Secret, or cert-manager issues them, not both" }}
{{- end }}
{{- if and .Values.tls.secretName (or $ca.secretName $ca.issuerRef) }}
{{- fail "tls.secretName and tls.meshCA are both set: bring one certificate for every broker, or a mesh CA that signs one per broker, not both" }}
{{- end }}
{{- if and $ca.secretName (not $ca.clientSecretName) }}
{{- fail "tls.meshCA.clientSecretName is required with tls.meshCA.secretName: clients get certificates from a client CA of their own, which the peer port does not trust, shared by the sites so that a client is accepted at every site" }}
{{- end }}
{{- if and $ca.clientSecretName (not $ca.secretName) }}
{{- fail "tls.meshCA.clientSecretName is set without tls.meshCA.secretName, the mesh CA that signs the brokers' certificates" }}
{{- end }}
{{- if and $ca.issuerRef (not $ca.clientIssuerRef) }}
{{- fail "tls.meshCA.clientIssuerRef is required with tls.meshCA.issuerRef: the issuer of the clients' certificates, which brokers accept from clients" }}
{{- end }}
{{- if and $ca.clientIssuerRef (not $ca.issuerRef) }}
{{- fail "tls.meshCA.clientIssuerRef is set without tls.meshCA.issuerRef, the issuer of the brokers' certificates" }}
{{- end }}
{{- range $k, $ref := dict "issuerRef" $ca.issuerRef "clientIssuerRef" $ca.clientIssuerRef }}
{{- if and $ref (not $ref.name) }}
{{- fail (printf "tls.meshCA.%s: name, the cert-manager Issuer or ClusterIssuer, is required" $k) }}
{{- end }}
{{- end }}
{{- if and (include "drip.siteName" .) (eq (include "drip.tlsMode" .) "generated") }}
{{- fail (printf "site.name %q: the sites of a mesh trust each other only through a CA they share: set tls.meshCA.secretName and clientSecretName (or issuerRef and clientIssuerRef); a CA generated for this release is foreign to the other sites" (include "drip.siteName" .)) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
A CA of tls.meshCA read from its Secret, as JSON {Cert, Key, Trust} (PEM):
call with (list $ secretName what). Trust is the Secret's ca.crt, the CAs
brokers and clients trust (old and new during a rotation), or the CA alone.
*/}}
{{- define "drip.meshCA" -}}
{{- $ := index . 0 }}
{{- $name := index . 1 }}
{{- $what := index . 2 }}
{{- $data := (lookup "v1" "Secret" $.Release.Namespace $name).data | default dict }}
{{- if not (and (hasKey $data "tls.crt") (hasKey $data "tls.key")) }}
{{- fail (printf "%s: no Secret %q with tls.crt and tls.key in namespace %s: create it before installing, with the same CA at every site (helm template cannot read Secrets unless run with --dry-run=server)" $what $name $.Release.Namespace) }}
{{- end }}
{{- $cert := index $data "tls.crt" | b64dec }}
{{- $trust := $cert }}
{{- with index $data "ca.crt" }}
{{- $trust = b64dec . }}
{{- if not (contains (trim $cert) $trust) }}
{{- fail (printf "%s: ca.crt of Secret %q does not contain its tls.crt: brokers and clients would not trust the certificates its CA signs" $what $name) }}
{{- end }}
{{- end }}
{{- toJson (dict "Cert" $cert "Key" (index $data "tls.key" | b64dec) "Trust" $trust) }}
{{- end }}

{{/*
A digest of what the brokers' certificates are made from, for the pod
template: brokers read their certificate and CAs when they start, so a
change of their names, issuer or trusted CAs rolls them. Without the
generated CAs, which helm template makes anew on every render.
*/}}
{{- define "drip.tlsChecksum" -}}
{{- $in := dict "mode" (include "drip.tlsMode" .) }}
{{- if eq (include "drip.tlsPerBroker" .) "true" }}
{{- $names := list }}
{{- range $i := until (int .Values.replicaCount) }}
{{- $names = append $names (include "drip.brokerCertNames" (list $ $i) | fromJson) }}
{{- end }}
{{- $_ := set $in "names" $names }}
{{- end }}
{{- if eq (include "drip.tlsMode" .) "meshCA" }}
{{- $_ := set $in "ca" (omit (include "drip.meshCA" (list . .Values.tls.meshCA.secretName "tls.meshCA.secretName") | fromJson) "Key") }}
{{- $_ := set $in "clientCA" (omit (include "drip.meshCA" (list . .Values.tls.meshCA.clientSecretName "tls.meshCA.clientSecretName") | fromJson) "Key") }}
{{- end }}
{{- if eq (include "drip.tlsMode" .) "certManager" }}
{{- $_ := set $in "issuers" (list .Values.tls.meshCA.issuerRef .Values.tls.meshCA.clientIssuerRef) }}
{{- end }}
{{- toJson $in | sha256sum }}
{{- end }}
