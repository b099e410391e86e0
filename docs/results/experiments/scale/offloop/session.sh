#!/bin/bash
# The locked session of the "rebuilds off the event loop" run: the clients
# sweep at 20 and 50 clients per site on drip, as run 4's session 2, with
# this branch's binaries (copies in /work/scale5-runs), then
# BenchmarkBuildSteps. Run as: flock -o /work/lab.lock offloop/session.sh
D=/work/scale5/docs/results/experiments/scale
export R=/work/scale5-runs NAME=s6run
date -u +"lock taken %FT%TZ"
$D/run4/run.sh $R/clients20-drip scale-clients-20 drip
$D/run4/run.sh $R/clients50-drip scale-clients-50 drip
date -u +"lab runs over %FT%TZ"
(cd /work/scale5 && PATH=$PATH:/usr/local/go/bin go test ./internal/encoding/ -run XXX -bench BuildSteps -benchmem -benchtime 400x -count 3) > $R/bench.txt 2>&1
date -u +"lock released %FT%TZ"
