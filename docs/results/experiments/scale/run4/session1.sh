#!/bin/bash
# Locked session 1: scale-base on drip, then on drip-uncompressed.
D=/work/scale4/docs/results/experiments/scale/run4
date -u +"lock taken %FT%TZ"
$D/run.sh /work/scale4-runs/base-drip scale-base drip
$D/run.sh /work/scale4-runs/base-drip-uncompressed scale-base drip-uncompressed
date -u +"lock released %FT%TZ"
