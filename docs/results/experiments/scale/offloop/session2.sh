#!/bin/bash
# The second locked session: scale-clients-50 on drip again, since the first
# session's attempt never started sending (s14 formed no adjacency; see
# README). Same binaries and command.
D=/work/scale5/docs/results/experiments/scale
export R=/work/scale5-runs NAME=s6run
date -u +"lock taken %FT%TZ"
$D/run4/run.sh $R/clients50-drip-2 scale-clients-50 drip
date -u +"lock released %FT%TZ"
