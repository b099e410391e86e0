// Package e2e holds the end-to-end test of drip on Kubernetes; it has no code
// of its own, only tests (README.md says how to run them).
//
// TestMesh installs the Helm chart (deploy/helm/drip) into a fresh namespace,
// with a topology and netem link shaping, and checks what no in-process test
// can: that the chart's StatefulSet, Services and topology make a mesh that
// converges, that its `helm test` hook passes, that the Carzaniga09 §5.1.4
// workload run by `drip bench` as a Job is delivered exactly (Carzaniga09 §3:
// Bloom false positives cost bandwidth but never reach a client) and nearly
// completely, and what the nodes' kernel could not emulate. TestMultiSite
// (-scenario multisite) installs several releases in namespaces of their
// own as the sites of one mesh across clusters, linked only at external
// addresses with a shared CA, and deletes and reinstalls one under load.
//
// The cluster is either one that -kubeconfig names, or a kind cluster the
// suite creates (and deletes) with kind's Go API, which needs a Docker engine.
// Without either the test skips with one line saying why, so the package is
// safe in `go test ./...`. TestMain owns the cluster, the way
// sigs.k8s.io/e2e-framework's environments do: Setup (cluster, image) runs
// once, when the first test asks for the cluster, and Finish tears down what
// Setup created after all tests ran. The helpers the cluster steps rely on
// (install values, report checks, metrics parsing, the Job spec) are pure
// and unit-tested, so they run everywhere.
package e2e
