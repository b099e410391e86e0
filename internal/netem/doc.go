// Package netem is drip's traffic-shaping sidecar: it makes one broker's
// egress to each neighbour look like the wide-area link the topology file
// describes (bandwidth, one-way delay, jitter, loss), so that a mesh running
// in one cluster behaves like the WAN overlay of Carzaniga09 §5.1 (brokers
// joined by links of limited bandwidth and real latency).
//
// Shaping is per destination on the sending side. On the pod's device it
// installs, over netlink (no tc binary):
//
//	htb root d1:  (default d1:ffff)
//	├── class d1:ffff  everything not sent to a neighbour, unshaped
//	├── class d1:1000+ID  rate = ceil = the link's bandwidth
//	│   └── netem 1000+ID:  delay, jitter, loss   (bfifo when the kernel lacks netem)
//	└── u32 filters  dst <neighbour IP>/32 (/128) → class d1:1000+ID
//
// The work is split so that each part can be tested alone:
//
//   - [NewPlan] is pure: topology, own name and resolved neighbour addresses
//     in, the desired [State] out (handles, rates, netem parameters,
//     filters), plus per-neighbour notes of what the kernel cannot do.
//   - [Reconcile] brings a device to a desired State through the small [TC]
//     interface: it reads back what is installed and changes only what
//     differs, so a steady mesh costs no netlink writes and a neighbour that
//     moved to a new IP costs exactly one filter swap.
//   - [Netlink] is the real TC; [Fake] is an in-memory one that enforces the
//     kernel's rules the reconciler depends on (a class with filters bound
//     cannot be deleted, a slot holds one qdisc, ...).
//   - [Shaper] is the loop: resolve neighbours' names (in Kubernetes they
//     are headless-service pod names, and pods move), plan, reconcile, every
//     interval; it removes what it installed when stopped.
//
// Everything drip installs hangs under the root handle d1:, which is how a
// restarted sidecar recognises a previous run's leftovers and how it knows
// never to touch a root qdisc someone else installed.
package netem
