#!/usr/bin/env python3
"""longest.py RUNDIR...: the longest PREDICATES rebuilds in run4/run.sh's 2-s scrapes of every
broker. A scrape interval gives only the mean of the rebuilds in it (the increase of
drip_predicate_index_rebuild_duration_seconds_sum over that of _count), so the longest single
rebuild is at least the largest such mean; printed with the largest over intervals holding
exactly one rebuild, by kind."""
import glob, re, sys

for d in sys.argv[1:]:
    best = {}  # kind -> (mean, broker, n)
    one = {}
    for f in glob.glob(d + '/scrape/*.txt'):
        name = f.split('/')[-1][:-4]
        prev, cur = None, None
        samples = []
        for line in open(f):
            if line.startswith('T '):
                cur = {}; samples.append(cur); continue
            m = re.match(r'drip_predicate_index_rebuild_duration_seconds_(sum|count)\{kind="(\w+)"\} (\S+)', line)
            if m and cur is not None:
                cur[(m.group(1), m.group(2))] = float(m.group(3))
        for a, b in zip(samples, samples[1:]):
            for kind in ('full', 'partial'):
                dc = b.get(('count', kind), 0) - a.get(('count', kind), 0)
                ds = b.get(('sum', kind), 0) - a.get(('sum', kind), 0)
                if dc <= 0:
                    continue  # none, or a restart reset the counters
                mean = ds / dc
                if mean > best.get(kind, (0,))[0]:
                    best[kind] = (mean, name, int(dc))
                if dc == 1 and mean > one.get(kind, (0,))[0]:
                    one[kind] = (mean, name, 1)
    for kind in ('full', 'partial'):
        b, o = best.get(kind), one.get(kind)
        print(f"{d}: {kind}: largest interval mean {b[0]:.2f} s ({b[1]}, {b[2]} rebuilds)" if b else f"{d}: {kind}: none",
              f"| largest single {o[0]:.2f} s ({o[1]})" if o else "| no interval with one")
