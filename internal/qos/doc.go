// Package qos is the arithmetic of delivery deadlines (Kim10 §2.2,
// docs/design.md §11): which deadline and path count a message has at each
// destination router, and how much of its latency margin each link may
// spend. It is pure: no clock, goroutine or I/O; times are durations the
// caller measured.
//
// # Budgets
//
// A message with deadline D that has travelled for some time has a budget
// B, the time left. Its path to a destination still has k links whose
// advertised delays add up to d. Kim10 §2.2 divides the latency margin
// B − d equally among the links: each link's share is
//
//	b = (B − d) / k
//
// which is both the bundle's urgency at the link's queue (a bundle may
// wait there b, no longer) and the link's allowance: the link's delay may
// grow by b before the flow misses. A bundle for several destinations
// takes the least share among them. A share below zero means the deadline
// is out of reach by the current estimates.
//
// # Classes
//
// Routers advertise the filters of their deadline and two-path
// subscribers by class (linkstate.QoSClass). An ingress router looks up,
// for each destination of a message, the classes whose filters the
// message's Bloom filter contains: the tightest deadline among them and
// whether any asks for two paths (Table.Lookup). A Bloom false positive
// can only make a message more urgent than it needs to be, never less.
package qos
