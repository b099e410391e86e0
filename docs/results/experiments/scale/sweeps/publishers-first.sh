#!/bin/bash
# The clients sweep with publishers opened before the settle check (bench,
# 1da2768) and the longer series (f3c9f87): 50 per site at the base's
# delivery volume, then 50 and 20 per site and the base at the sweep's own
# --scale 0.005, with run4/run.sh's scrapes, under the lab lock.
#   flock -o /work/lab.lock docs/results/experiments/scale/sweeps/publishers-first.sh
set -u
D=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/work/sweep-out}
run() { # scenario scale
  date -u +"$1 $2 start %FT%TZ"
  NAME=pf $D/run4/run.sh $OUT/pubfirst-$1-$2 $1 drip --scale $2
  tail -2 $OUT/pubfirst-$1-$2/run.log
}
run scale-clients-50 0.001
run scale-clients-50 0.005
run scale-clients-20 0.005
run scale-base 0.005
date -u +"done %FT%TZ"
