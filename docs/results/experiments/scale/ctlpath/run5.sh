#!/bin/bash
# scale-clients-50 on this branch's binaries at the link-liveness commit
# (a reader waiting on the control plane keeps its link heard).
D=/work/wt/docs/results/experiments/scale
date -u +"lock taken %FT%TZ"
R=/work/ctl-runs/new4 NAME=ctl $D/run4/run.sh /work/ctl-out/clients50-new4 scale-clients-50 drip
date -u +"lock released %FT%TZ"
