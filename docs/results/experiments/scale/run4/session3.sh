#!/bin/bash
# Locked session 3: scale-base on drip with a link cut (s0–s11, on the cycle
# s0–s11–s23, 12 s into sending, healed 8 s later) and a broker restart (s5,
# degree 2, no cut vertex, killed 35 s in, started again 5 s later).
D=/work/scale4/docs/results/experiments/scale/run4
date -u +"lock taken %FT%TZ"
LAB=/work/scale4-runs/driplab-fault $D/run.sh /work/scale4-runs/faults-drip scale-base drip \
    --fault cut:s0/s11@12s+8s --fault restart:s5@35s+5s
date -u +"lock released %FT%TZ"
