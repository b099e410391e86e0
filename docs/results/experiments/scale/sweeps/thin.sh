#!/bin/bash
# drip and NATS side by side on 100 kB/s links (scale-links-100), one locked
# run each with run4/run.sh's scrapes, NATS given ten minutes to form its
# 42-server full mesh (--ready-timeout; the default 168 s was not enough in
# session 4). Binaries: $R; results under $OUT/<system>.
set -u
D=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/work/sweep-out/thin}
for sys in drip nats; do
  date -u +"$sys start %FT%TZ"
  NAME=thin $D/run4/run.sh $OUT/$sys scale-links-100 $sys --ready-timeout 10m
  tail -2 $OUT/$sys/run.log
done
date -u +"done %FT%TZ"
