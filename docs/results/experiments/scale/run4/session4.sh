#!/bin/bash
# Locked session 4: scale-base with 100 kB/s links (--lab-bandwidth-scale 0.1)
# on drip and on NATS, so that NATS's full mesh saturates its busiest link
# within the ramp (2,648 bytes per published message at 1 MB/s in the steady
# part) while drip's (156) does not: the "2x NATS" comparison measured.
D=/work/scale4/docs/results/experiments/scale/run4
date -u +"lock taken %FT%TZ"
$D/run.sh /work/scale4-runs/thin-drip scale-base drip --lab-bandwidth-scale 0.1
$D/run.sh /work/scale4-runs/thin-nats scale-base nats --lab-bandwidth-scale 0.1
date -u +"lock released %FT%TZ"
