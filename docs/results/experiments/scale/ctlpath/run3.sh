#!/bin/bash
# The base and 20 clients per site on this branch's binaries at the commit
# after 2add2e3 (advertisements uncompressed, ParseFilters sized once).
D=/work/wt/docs/results/experiments/scale
date -u +"lock taken %FT%TZ"
R=/work/ctl-runs/new3 NAME=ctl $D/run4/run.sh /work/ctl-out/base-new3 scale-base drip
R=/work/ctl-runs/new3 NAME=ctl $D/run4/run.sh /work/ctl-out/clients20-new3 scale-clients-20 drip
date -u +"lock released %FT%TZ"
