#!/bin/bash
# Profile the hub (s1) and a leaf-side broker (s30) of one scale-clients-50
# run at --scale 0.001 during the ramp: a 20-s CPU profile each from 5 s
# and from 35 s into sending, and s1's goroutines at 30 s and 58 s, under
# the lab lock.
O=${O:-/work/sweep-out/hub-prof50}
D=$(cd "$(dirname "$0")/.." && pwd)
R=${R:-/work/ctl-runs/s19}
( R=$R NAME=hp $D/run4/run.sh $O scale-clients-50 drip --scale 0.001 --drip-args=--pprof ) &
runner=$!
for i in $(seq 1 400); do grep -q " 1s  sent" $O/run.log 2>/dev/null && break; sleep 1; done
date -u +"sending seen %T" >> $O/prof.log
addr() { awk -v s=$1 '$1==s{print $2}' $O/addrs.txt; }
prof() { # site k
  date -u +"profile $1 $2 %T" >> $O/prof.log
  $R/driplab lab exec --name hp $1 -- curl -s -m 40 "http://$(addr $1)/debug/pprof/profile?seconds=20" > $O/$1-cpu-$2.pb.gz
}
gor() { # site k
  date -u +"goroutines $1 $2 %T" >> $O/prof.log
  $R/driplab lab exec --name hp $1 -- curl -s -m 20 "http://$(addr $1)/debug/pprof/goroutine?debug=1" > $O/$1-goroutines-$2.txt
}
sleep 4
prof s1 1 & prof s30 1 & sleep 25; gor s1 1; wait
sleep 4
prof s1 2 & prof s30 2 & sleep 22; gor s1 2; wait
wait $runner
