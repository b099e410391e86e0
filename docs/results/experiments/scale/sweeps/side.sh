#!/bin/bash
# The base workload at the paper's load on drip, drip-uncompressed and NATS,
# one after the other in one locked session with run4/run.sh's scrapes: the
# side-by-side row of the results on one build. Binaries: $R; results under
# $OUT/<system>.
set -u
D=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/work/sweep-out/side}
for sys in drip drip-uncompressed nats; do
  date -u +"$sys start %FT%TZ"
  NAME=side $D/run4/run.sh $OUT/$sys scale-base $sys
  tail -2 $OUT/$sys/run.log
done
date -u +"done %FT%TZ"
