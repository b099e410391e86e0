package encoding

// benchParams are the Params the benchmarks compare: the default and the
// best K of the two smaller widths in the false-positive study.
var benchParams = []Params{{M: 256, K: 8}, {M: 384, K: 8}, DefaultParams()}
