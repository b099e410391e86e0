#!/usr/bin/env python3
"""wait.py RUNDIR...: how far behind each broker's control plane was, from run4/run.sh's 2-s
scrapes of drip_control_frame_wait_seconds (time a neighbour's control frame waited for the core)
and drip_core_events_queued. A scrape interval gives the mean wait of the frames processed in it
(the increase of _sum over that of _count); the buckets give how many frames waited longer than
1.6 s over the whole run (the dead interval is 4 s). Brokers whose binary has neither metric are
skipped. Prints the five brokers with the largest interval mean, and totals."""
import glob, re, sys

OVER = '1.6384'  # the bucket bound closest below the 4-s dead interval's half

for d in sys.argv[1:]:
    rows, frames, slow, seen = [], 0, 0, 0
    for f in sorted(glob.glob(d + '/scrape/*.txt')):
        name = f.split('/')[-1][:-4]
        samples, cur = [], None
        for line in open(f):
            if line.startswith('T '):
                cur = {}; samples.append(cur); continue
            if cur is None:
                continue
            m = re.match(r'drip_control_frame_wait_seconds_(sum|count) (\S+)', line)
            if m:
                cur[m.group(1)] = float(m.group(2)); continue
            m = re.match(r'drip_control_frame_wait_seconds_bucket\{le="([^"]+)"\} (\S+)', line)
            if m:
                cur['le' + m.group(1)] = float(m.group(2)); continue
            m = re.match(r'drip_core_events_queued (\S+)', line)
            if m:
                cur['queued'] = float(m.group(1))
        samples = [s for s in samples if 'count' in s]
        if not samples:
            continue
        seen += 1
        worst, over1 = 0.0, 0
        for a, b in zip(samples, samples[1:]):
            dc = b['count'] - a['count']
            if dc <= 0:
                continue  # nothing processed, or a restart reset the counters
            mean = (b['sum'] - a['sum']) / dc
            worst = max(worst, mean)
            over1 += mean > 1
        last = samples[-1]
        frames += last['count']
        if 'le' + OVER not in last:
            sys.exit(f"{f}: no bucket le={OVER} in the last scrape")
        slow += last['count'] - last['le' + OVER]
        rows.append((worst, name, over1, len(samples) - 1, max(s.get('queued', 0) for s in samples),
                     last['sum'] / max(1, last['count'])))
    rows.sort(reverse=True)
    print(f"{d}: {seen} brokers with the metrics; {frames:,.0f} control frames, "
          f"{slow:,.0f} ({100 * slow / max(1, frames):.2f}%) waited more than {OVER} s")
    for worst, name, over1, n, q, mean in rows[:5]:
        print(f"  {name}: largest interval mean wait {worst:.2f} s, {over1} of {n} intervals above 1 s, "
              f"mean over the run {1000 * mean:.1f} ms, most events queued at a scrape {q:.0f}")
