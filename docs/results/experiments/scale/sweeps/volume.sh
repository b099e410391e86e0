#!/bin/bash
# volume.sh [SCENARIO:SCALE ...]: one drip run of each scenario at its
# --scale, with run4/run.sh's scrapes, under the lab lock; into
# $OUT/$TAG-SCENARIO-SCALE. Without arguments, the clients sweep at the
# base's delivery volume: 20 and 50 clients per site with --scale lowered so
# that the ideal deliveries a second match the base's at --scale 0.005
# (replication grows with the clients: 21, 42 and 105 subscribers a message).
#   flock -o /work/lab.lock docs/results/experiments/scale/sweeps/volume.sh
set -u
D=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/work/sweep-out}
TAG=${TAG:-volume}
[ $# -gt 0 ] || set -- scale-clients-20:0.0025 scale-clients-50:0.001 scale-clients-50:0.0005
for run in "$@"; do
  scen=${run%%:*} scale=${run##*:}
  date -u +"$scen $scale start %FT%TZ"
  NAME=vol $D/run4/run.sh $OUT/$TAG-$scen-$scale $scen drip --scale $scale
  tail -2 $OUT/$TAG-$scen-$scale/run.log
done
date -u +"done %FT%TZ"
