#!/usr/bin/env python3
"""faults.py RUNDIR: the faults of a `driplab experiment run --fault` run made with run.sh —
when each was injected and undone (the result's faults), the adjacencies the brokers' logs
saw go down and up around it, control messages sent by all brokers (drip_link_sent_control_total,
2-s scrapes) against the 10 s before, and output against ideal per second around it."""
import collections, datetime, glob, json, re, sys

d = sys.argv[1]
res = json.load(open(glob.glob(d + '/results/*-drip.json')[0]))
ts = lambda s: datetime.datetime.fromisoformat(s.replace('Z', '+00:00')).timestamp()
t0 = None  # wall clock of sending start
for f in res.get('faults', []):
    t0 = ts(f['at']) - f['at_s']
    break
events = []
for f in glob.glob(d + '/keep/*/drip-s*.log'):
    for line in open(f):
        if '"adjacency down"' in line or '"adjacency up"' in line or '"adjacency advertised"' in line.lower():
            j = json.loads(line)
            events.append((ts(j['ts']) - t0, j['broker'], j['msg'], j.get('peer'), j.get('reason', '')))
events.sort()
# control messages per scrape interval, all brokers
ctl = collections.Counter()
for f in glob.glob(d + '/scrape/*.txt'):
    prev = {}; t = None
    for line in open(f):
        if line.startswith('T '):
            t = float(line.split()[1]) - t0; continue
        m = re.match(r'drip_link_sent_control_total\{peer="([^"]+)"\} (\S+)', line)
        if m and t is not None:
            v = float(m.group(2)); p = prev.get(m.group(1), 0.0)
            ctl[int(t // 2) * 2] += v - p if v >= p else v
            prev[m.group(1)] = v
series = {p['t']: p for p in res['series']}
for f in res.get('faults', []):
    at, end = f['at_s'], f.get('end_s', f['at_s'])
    settled = end + f.get('settled_after_end_s', 0)
    print(f"== {f['fault']}: at {at:.2f} s, undone {end:.2f} s, settled {f.get('settled_after_end_s', 0):.2f} s after; error: {f.get('error', '')}")
    for e in events:
        if at - 1 <= e[0] <= settled + 5 and e[4] != 'shutdown':
            print(f"   {e[0]:7.2f}  {e[1]:>4} {e[2]:<22} peer {e[3]} {e[4]}")
    # The steady rate: the lower quartile of the 2-s counts over the sending seconds (the
    # waves of re-advertisements at the start and end of sending are outliers).
    steady = sorted(ctl[b] for b in ctl if 0 <= b < 60)
    base = steady[len(steady) // 4] / 2
    win = [b for b in sorted(ctl) if int(at // 2) * 2 <= b <= int(settled // 2) * 2 + 2]
    print(f"   control messages, all brokers: {base:.0f}/s steady (lower quartile over sending); per 2 s from the fault to Ready after the undo: "
          + ' '.join(f"{b}:{ctl[b]:.0f}" for b in win))
    print("   t: output/ideal undelivered(by send second)")
    print('   ' + ' '.join(f"{t}:{series[t]['output']}/{series[t]['ideal']}/{series[t]['undelivered']}" for t in range(int(at) - 2, int(settled) + 4) if t in series))
print('control messages per 2 s, all brokers:', ' '.join(f"{b:.0f}:{ctl[b]:.0f}" for b in sorted(ctl)))
print('totals', {k: res['totals'][k] for k in ('ideal', 'delivered', 'undelivered', 'duplicates', 'false_positives', 'lost') if k in res['totals']},
      {k: res['totals'].get(k) for k in ('gaps', 'max_gap_ms', 'failovers', 'in_flight_lost')})
