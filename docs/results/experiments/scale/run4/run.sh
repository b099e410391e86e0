#!/bin/bash
# run.sh OUT SCENARIO SYSTEM [driplab flags...]: one lab run of SCENARIO on
# SYSTEM with every broker's PREDICATES rebuild counters, re-advertisements
# and adjacency-down events (and, since the ctlpath runs, how far behind its
# control plane is) scraped every 2 s from inside its own site, and
# `top` every 10 s. Binaries: $R, by default /work/scale4-runs (copies, so that a rebuild
# of the worktree does not change a running experiment).
set -u
OUT=$1; SCEN=$2; SYS=$3; shift 3
R=${R:-/work/scale4-runs}; LAB=${LAB:-$R/driplab}; NAME=${NAME:-s4run}
mkdir -p $OUT/keep $OUT/scrape
date -u +%FT%TZ > $OUT/start.txt
( $LAB experiment run --lab --lab-name $NAME --scenario $SCEN --systems $SYS \
    --scale 0.005 --lab-bandwidth-scale 1 --duration 60s --drip-binary $R/drip "$@" \
    --keep $OUT/keep --out $OUT/results > $OUT/run.log 2>&1; echo exit $? >> $OUT/run.log ) &
runner=$!
(while kill -0 $runner 2>/dev/null; do { date -u +%T; cat /proc/loadavg; top -b -n1 -o %CPU | sed -n 7,16p; } >> $OUT/top.txt; sleep 10; done) &
topo=""
for i in $(seq 1 180); do topo=$(find $OUT/keep -name drip-topology.yaml 2>/dev/null | head -1); [ -n "$topo" ] && break; sleep 1; done
echo "topo $topo"
if [ -n "$topo" ]; then
  python3 -c "
import yaml
t=yaml.safe_load(open('$topo'))
for b in t['brokers']: print(b['name'], b['metrics'])" > $OUT/addrs.txt
  sleep 3
  while read -r name addr; do
    $LAB lab exec --name $NAME $name -- sh -c "fails=0; for i in \$(seq 1 300); do t=\$(date +%s.%N); m=\$(curl -s -m 2 http://$addr/metrics) || { fails=\$((fails+1)); [ \$fails -ge 5 ] && exit 0; sleep 2; continue; }; echo \"T \$t\"; echo \"\$m\" | grep -E '^drip_(predicate_index_rebuild_duration_seconds_(count|sum)|predicate_advertisements_total|predicate_advertisements_sent_total|predicate_advertisement_sent_bytes_total|subscriptions|routers_known|lsdb_digest|link_sent_control_total|control_frame_wait_seconds_(bucket|count|sum)|core_events_queued)[ {]|adjacency_(down|up)'; sleep 2; done" > $OUT/scrape/$name.txt 2>&1 &
  done < $OUT/addrs.txt
fi
wait $runner
sleep 8
date -u +%FT%TZ > $OUT/end.txt
echo finished
