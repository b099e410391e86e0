#!/bin/bash
# Profile s1 and s30 of a scale-clients-50 run on binaries with predicate
# deltas: two 20-s CPU profiles each once subscriptions are installed, and
# the top of the machine's processes, under the lab lock.
O=${O:-/work/sweep-out/deltas-prof50}
D=$(cd "$(dirname "$0")/.." && pwd)
R=${R:-/work/ctl-runs/delta}
( R=$R NAME=dp $D/run4/run.sh $O scale-clients-50 drip --drip-args=--pprof ) &
runner=$!
for i in $(seq 1 300); do grep -q "subscriptions installed" $O/run.log 2>/dev/null && break; sleep 2; done
date -u +"subscriptions installed seen %T" >> $O/prof.log
for k in 1 2; do
  pids=""
  for s in s1 s30; do
    addr=$(awk -v s=$s '$1==s{print $2}' $O/addrs.txt)
    date -u +"profile $s $k %T" >> $O/prof.log
    $R/driplab lab exec --name dp $s -- curl -s -m 40 "http://$addr/debug/pprof/profile?seconds=20" > $O/$s-cpu-$k.pb.gz &
    pids="$pids $!"
  done
  wait $pids
done
wait $runner
