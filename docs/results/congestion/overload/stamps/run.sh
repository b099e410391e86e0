#!/bin/bash
# Carzaniga09's 8-broker overload (2x: --scale 0.2, 4x: --scale 0.4) on drip dropping at its link
# queues (--link-wait=0), without and with congestion control, interleaved; binaries (drip, driplab of the commit under test) in $RUNS.
L=${RUNS:-/work/run13}/driplab
echo "lock taken $(date -u +%FT%TZ)"
for sc in 0.2 0.4; do
  for cc in "" "--drip-congestion-feedback"; do
    tag=$([ -n "$cc" ] && echo cc || echo nocc)
    timeout 300 $L experiment run --lab --scenario brokers-8 --systems drip --scale $sc --lab-bandwidth-scale 0.1 --duration 60s --drip-binary ${RUNS:-/work/run13}/drip --drip-args=--link-wait=0 $cc --out ${RUNS:-/work/run13}/overload-$sc-$tag > ${RUNS:-/work/run13}/overload-$sc-$tag.log 2>&1
    echo "$sc $tag rc=$? $(tail -1 ${RUNS:-/work/run13}/overload-$sc-$tag.log)"
  done
done
echo "lock released $(date -u +%FT%TZ)"
