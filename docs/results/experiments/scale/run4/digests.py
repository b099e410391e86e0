#!/usr/bin/env python3
"""digests.py RUNDIR T0: from run.sh's scrapes, at each scrape of any broker (seconds from the
start of sending, T0 its wall clock in Unix seconds), how many distinct LSDB digests the
brokers' latest scrapes hold, the fewest routers any broker knows, and the sum of their
subscriptions: when the mesh agreed again after a fault (2–4-s resolution)."""
import glob, re, sys
d, t0 = sys.argv[1], float(sys.argv[2])
rows = []
for f in glob.glob(d + '/scrape/*.txt'):
    name = f.split('/')[-1][:-4]; t = None
    for line in open(f):
        if line.startswith('T '):
            t = float(line.split()[1]) - t0; continue
        for key in ('drip_lsdb_digest', 'drip_routers_known', 'drip_subscriptions'):
            if line.startswith(key + ' '):
                rows.append((t, name, key, float(line.split()[1])))
rows.sort()
latest = {}
last = None
for t, name, key, v in rows:
    latest[(name, key)] = v
    dig = {v for (n, k), v in latest.items() if k == 'drip_lsdb_digest'}
    known = [v for (n, k), v in latest.items() if k == 'drip_routers_known']
    subs = sum(v for (n, k), v in latest.items() if k == 'drip_subscriptions')
    state = (len(dig), min(known) if known else 0, int(subs))
    if state != last:
        print(f"{t:7.2f}  digests {state[0]:2d}  min routers known {state[1]:.0f}  subscriptions {state[2]}")
        last = state
