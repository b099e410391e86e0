#!/bin/bash
# 50 and 20 clients per site on binaries with predicate advertisements as
# deltas (run4/run.sh's scrapes), under the lab lock.
set -u
D=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/work/sweep-out}
for scen in "$@"; do
  date -u +"$scen start %FT%TZ"
  NAME=dl $D/run4/run.sh $OUT/deltas-$scen $scen drip
  tail -2 $OUT/deltas-$scen/run.log
done
date -u +"done %FT%TZ"
