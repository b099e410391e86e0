#!/bin/bash
# Locked session 2: the clients sweep at 20 and 50 clients per site, drip.
D=/work/scale4/docs/results/experiments/scale/run4
date -u +"lock taken %FT%TZ"
$D/run.sh /work/scale4-runs/clients20-drip scale-clients-20 drip
$D/run.sh /work/scale4-runs/clients50-drip scale-clients-50 drip
date -u +"lock released %FT%TZ"
