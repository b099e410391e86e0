// Package fanout measures a broker's memory under a wide fan-out with slow
// subscribers (issue 17's probe): one `drip broker` process on loopback,
// thousands of subscribers and hundreds of publishers driven from this
// process, and the broker's resident set sampled from /proc while they
// run. The load stays in this process so that the broker's RSS is the
// broker's alone. docs/results/memory-budget.md reports its runs.
package fanout
