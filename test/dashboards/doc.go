// Package dashboards holds the tests of drip's Grafana dashboards
// (deploy/helm/drip/dashboards/*.json); it has no code of its own.
//
// The dashboards are JSON that no compiler reads, and they depend on the
// metric names and labels of docs/metrics.md, a contract the brokers keep
// (internal/broker's TestMetricsLint). Two kinds of test keep them from
// drifting silently:
//
//   - Static: every dashboard is well-formed Grafana JSON with a fixed,
//     unique uid; every panel queries the dashboard's `datasource`
//     variable; every PromQL expression parses once Grafana's variables are
//     substituted, reads only metrics and labels that docs/metrics.md
//     documents, and filters on the dashboard's `instance` (and `peer`)
//     variables. Broken dashboards in the tests show each check can fail.
//   - Live: a three-broker mesh runs in-process with traffic that provokes
//     false positives, link and route drops, subscriber loss and handshake
//     failures; a real Prometheus (the Debian package's /usr/bin/prometheus)
//     scrapes it, and every expression of every dashboard must return
//     data, with the legend's labels present and the provoked losses
//     visible.
package dashboards
