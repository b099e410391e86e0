// Package lab is drip's emulated wide-area network on one Linux machine:
// the stand-in for the testbed of Carzaniga09 §5.1.2, where brokers ran on
// separate machines and Linux traffic control shaped the links between them
// (docs/design.md §8).
//
// Every site (a broker of an internal/topology file) gets its own network
// namespace, named drip-lab-<lab>.<site>, with loopback and one TUN device
// holding the site's address and a route to the whole lab prefix. A lab
// daemon reads the packets the sites send into their TUNs, carries each one
// along the least-weight path of the site graph, and writes it into the
// destination site's TUN. On every link it crosses, a packet meets that
// link's emulation in turn: random loss, serialisation at the link rate
// behind a bounded drop-tail queue, then the one-way delay plus jitter.
// The kernel here has no sch_netem, so all of this is done in userspace
// with one mechanism rather than a mix of tbf and a delay line.
//
// The package separates the pure model from the I/O:
//
//   - Link and Network are a deterministic discrete-event model of the
//     links (time is passed in; tests use a fake clock);
//   - Addresses and the generators (Generate) turn shapes and topology
//     files into site addresses;
//   - the daemon (RunDaemon), the namespaces and the TUN devices are the
//     I/O around them, and Up, Open and Down are what the CLI and an
//     experiment runner use: start the lab detached, start processes or
//     dial connections inside a site, read per-link counters, change links
//     live, and remove everything, also after the daemon was killed.
//
// State lives under /run/drip-lab/<lab>/ (config, pid file, control
// socket, site table, daemon log); see docs/lab.md.
package lab
