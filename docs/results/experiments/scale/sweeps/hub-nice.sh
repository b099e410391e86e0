#!/bin/bash
# scale-clients-50 at --scale 0.001 with the hub broker (s1, the busiest
# control plane) given ten times the others' CPU weight (nice -10) as soon
# as it starts: whether its share of the 2 cores, not drip, is what limits
# 50 clients per site at the base's delivery volume. Under the lab lock.
O=${O:-/work/sweep-out/hub-nice50}
D=$(cd "$(dirname "$0")/.." && pwd)
R=${R:-/work/ctl-runs/s19}
( R=$R NAME=hn $D/run4/run.sh $O scale-clients-50 drip --scale 0.001 ) &
runner=$!
for i in $(seq 1 300); do
  pid=$(pgrep -f -- "--name s1 --" | head -1)
  [ -n "$pid" ] && break; sleep 1
done
renice -n -10 -p $pid > $O.renice.txt 2>&1; date -u +"reniced s1 ($pid) %T" >> $O.renice.txt
wait $runner
