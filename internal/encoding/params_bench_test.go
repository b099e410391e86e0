package encoding

// benchParams are the Params the benchmarks compare: the best K of the two
// smaller cat-v1 widths in the false-positive study, and both schemes'
// defaults.
var benchParams = []Params{{M: 256, K: 8}, {M: 384, K: 8}, DefaultParamsV1(), DefaultParams()}
