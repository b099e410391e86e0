#!/bin/bash
D=/work/wt/docs/results/experiments/scale
date -u +"lock taken %FT%TZ"
R=/work/ctl-runs/new2 NAME=ctl $D/run4/run.sh /work/ctl-out/clients50-new2 scale-clients-50 drip
date -u +"lock released %FT%TZ"
