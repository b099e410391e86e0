#!/bin/bash
# The clients sweep at the base's delivery volume: 20 and 50 clients per
# site with --scale lowered so that the ideal deliveries a second match the
# base's at --scale 0.005 (replication grows with the clients: 21, 42 and 105
# subscribers a message), under the lab lock, with run4/run.sh's scrapes.
#   flock -o /work/lab.lock docs/results/experiments/scale/sweeps/volume.sh
set -u
D=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/work/sweep-out}
run() { # scenario scale
  date -u +"$1 $2 start %FT%TZ"
  NAME=vol $D/run4/run.sh $OUT/volume-$1-$2 $1 drip --scale $2
  tail -2 $OUT/volume-$1-$2/run.log
}
run scale-clients-20 0.0025
run scale-clients-50 0.001
run scale-clients-50 0.0005
date -u +"done %FT%TZ"
