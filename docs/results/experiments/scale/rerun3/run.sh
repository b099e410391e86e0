#!/bin/bash
# run.sh OUT DRIPBIN SYSTEM: scale-base with per-second metric scrapes of every broker (from its own namespace)
set -u
OUT=$1; BIN=$2; SYS=${3:-drip}; mkdir -p $OUT/keep $OUT/scrape
R=/work/scale3-runs; LAB=$R/driplab; NAME=s3run
date -u +%FT%TZ > $OUT/start.txt
( $LAB experiment run --lab --lab-name $NAME --scenario scale-base --systems $SYS \
    --scale 0.005 --lab-bandwidth-scale 1 --duration 60s --drip-args=--pprof,--log-level=debug --drip-binary $BIN \
    --keep $OUT/keep --out $OUT/results > $OUT/run.log 2>&1; echo exit $? >> $OUT/run.log ) &
runner=$!
topo=""
for i in $(seq 1 120); do topo=$(find $OUT/keep -name drip-topology.yaml 2>/dev/null | head -1); [ -n "$topo" ] && break; sleep 1; done
echo "topo $topo"
python3 -c "
import yaml
t=yaml.safe_load(open('$topo'))
for b in t['brokers']: print(b['name'], b['metrics'])" > $OUT/addrs.txt
sleep 3
while read -r name addr; do
  $LAB lab exec --name $NAME $name -- sh -c "fails=0; for i in \$(seq 1 420); do t=\$(date +%s.%N); m=\$(curl -s -m 2 http://$addr/metrics) || { fails=\$((fails+1)); [ \$fails -ge 5 ] && exit 0; sleep 1; continue; }; echo \"T \$t\"; echo \"\$m\" | grep -E '^drip_(predicate_advertisements_total|subscriptions|advertisement_pending|spf_runs_total|routers_known|advertised_filters|lsdb_digest)[ {]'; sleep 1; done" > $OUT/scrape/$name.txt 2>&1 &
done < $OUT/addrs.txt
(while kill -0 $runner 2>/dev/null; do top -b -n1 -o %CPU | head -15 >> $OUT/top.txt; sleep 10; done) &
wait $runner
sleep 8
date -u +%FT%TZ > $OUT/end.txt
echo finished
