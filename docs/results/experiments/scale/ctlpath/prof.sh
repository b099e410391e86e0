#!/bin/bash
# Profile s0 (and s1) of a scale-clients-50 run of this branch's binaries:
# three 20-s CPU profiles of s0 once subscriptions are installed, a goroutine dump each time.
O=/work/ctl-out/prof50
D=/work/wt/docs/results/experiments/scale
( R=/work/ctl-runs/new NAME=ctl $D/run4/run.sh $O scale-clients-50 drip --drip-args=--pprof ) &
runner=$!
for i in $(seq 1 300); do grep -q "subscriptions installed" $O/run.log 2>/dev/null && break; sleep 2; done
date -u +"subscriptions installed seen %T" >> $O/prof.log
addr=$(awk '$1=="s0"{print $2}' $O/addrs.txt)
for k in 1 2 3; do
  date -u +"profile $k %T" >> $O/prof.log
  /work/ctl-runs/new/driplab lab exec --name ctl s0 -- curl -s -m 40 "http://$addr/debug/pprof/profile?seconds=20" > $O/s0-cpu-$k.pb.gz
  /work/ctl-runs/new/driplab lab exec --name ctl s0 -- curl -s -m 10 "http://$addr/debug/pprof/goroutine?debug=1" > $O/s0-goroutines-$k.txt
done
wait $runner
