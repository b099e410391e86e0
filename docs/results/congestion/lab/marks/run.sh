#!/bin/sh
# Fig. 8 with control, without marks and with brokers marking from a link
# queue's 16 KiB, 4 KiB and 1 byte (of the lab's 32 KiB), then with a
# 256 KiB link queue without marks and marking from 192 KiB; one run after
# another, the machine otherwise idle (29 Nov, 15:33–15:47 UTC).
set -e
out=${OUT:-docs/results/congestion/lab/marks}
for i in 1 2; do
  for m in 0 16384; do
    bin/driplab congestion --scenario fig8 --variants drip+cc --link-mark $m --out /tmp/marks/m$m-r$i
    cp /tmp/marks/m$m-r$i/fig8.json "$out/fig8-m$m-r$i.json"; cp /tmp/marks/m$m-r$i/fig8.png "$out/fig8-m$m-r$i.png"
  done
done
for m in 1 4096; do
  bin/driplab congestion --scenario fig8 --variants drip+cc --link-mark $m --out /tmp/marks/m$m-r1
  cp /tmp/marks/m$m-r1/fig8.json "$out/fig8-m$m-r1.json"; cp /tmp/marks/m$m-r1/fig8.png "$out/fig8-m$m-r1.png"
done
for m in 0 196608; do
  bin/driplab congestion --scenario fig8 --variants drip+cc --link-queue 262144 --link-mark $m --out /tmp/marks/q256-m$m
  cp /tmp/marks/q256-m$m/fig8.json "$out/fig8-q256-m$m.json"; cp /tmp/marks/q256-m$m/fig8.png "$out/fig8-q256-m$m.png"
done
# With the brokers' counters in the results (where the losses fell, how
# much was marked): without marks and marking from 4 KiB (16:07–16:12 UTC).
for m in 0 4096; do
  bin/driplab congestion --scenario fig8 --variants drip+cc --link-mark $m --out /tmp/marks/counted-m$m
  cp /tmp/marks/counted-m$m/fig8.json "$out/fig8-counted-m$m.json"; cp /tmp/marks/counted-m$m/fig8.png "$out/fig8-counted-m$m.png"
done
