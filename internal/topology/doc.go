// Package topology is drip's mesh description: brokers with their router
// IDs and addresses, and the links between them with optional WAN
// properties (bandwidth, delay, loss). One YAML format serves `drip broker`
// (which neighbours to dial), `drip local` (a whole mesh in one process),
// the emulated-WAN lab and the Helm chart.
//
// Example:
//
//	mesh: demo
//	brokers:
//	  - {name: b0, id: 0, client: 127.0.0.1:7000, peer: 127.0.0.1:7100, metrics: 127.0.0.1:9100}
//	  - {name: b1, id: 1, client: 127.0.0.1:7001, peer: 127.0.0.1:7101}
//	links:
//	  - {a: b0, b: b1, weight: 1, bandwidth: 1MBps, delay: 20ms, loss: 0.1%}
package topology
