#!/bin/bash
# The base workload on links of 10 kB/s (--lab-bandwidth-scale 0.01), so that
# drip's busiest link saturates with data about a third of the way up the
# ramp and the ramp ends near three times that input: "no collapse past
# saturation" measured. One locked run per system with run4/run.sh's scrapes.
# Binaries: $R; results under $OUT/<system>.
set -u
D=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/work/sweep-out/saturate}
for sys in "${@:-drip}"; do
  date -u +"$sys start %FT%TZ"
  NAME=sat $D/run4/run.sh $OUT/$sys scale-base $sys --lab-bandwidth-scale 0.01
  tail -2 $OUT/$sys/run.log
done
date -u +"done %FT%TZ"
