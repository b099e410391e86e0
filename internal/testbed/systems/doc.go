// Package systems deploys the publish/subscribe systems that the
// experiments of Carzaniga09 §5 compare, behind one interface, so that one
// runner (internal/testbed/experiment) and one oracle (internal/bench) measure them
// the same way:
//
//   - drip: B-DRP brokers (internal/broker), in this process or as drip
//     processes, with the topology's links as peer links;
//   - activemq: Apache ActiveMQ 5.17 from the Debian package as a network of
//     brokers over the same links (duplex network connectors), reached over
//     STOMP (internal/testbed/stomp) with JMS selectors translated from drip
//     predicates (Selector), the touchstone of Carzaniga09 §5.1.1 and §5.1.3;
//   - nats: a nats-server cluster (full mesh of routes, as NATS requires)
//     with every message on one subject and content filtering in the
//     subscribing client, since NATS has subjects only.
//
// A Placement says where each site's processes run and where its clients
// connect from: Loopback puts every site on 127.0.0.1; the lab
// (internal/testbed/lab) gives each site a network namespace behind emulated WAN
// links. A LinkCounter reads bytes per link direction for the busiest-link
// utilisation of Carzaniga09 Figs. 4–5.
package systems
