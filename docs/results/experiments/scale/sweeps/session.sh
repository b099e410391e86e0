#!/bin/bash
# The filters and constraints sweeps, one lab run per scenario and system
# under the lab lock, with run4/run.sh's scrapes. Binaries: $R (copies of a
# build of main); results under $OUT/<scenario>-<system>.
set -u
D=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/work/sweep-out}
for scen in "$@"; do
  for sys in drip drip-uncompressed; do
    date -u +"$scen $sys start %FT%TZ"
    NAME=sw $D/run4/run.sh $OUT/$scen-$sys $scen $sys
    tail -2 $OUT/$scen-$sys/run.log
  done
done
date -u +"done %FT%TZ"
