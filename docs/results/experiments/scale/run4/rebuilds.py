#!/usr/bin/env python3
"""rebuilds.py RUNDIR: PREDICATES rebuilds (drip_predicate_index_rebuild_duration_seconds),
re-advertisements and adjacencies down, from run.sh's 2-s scrapes of every broker and the
brokers' logs. Times are seconds from the first scrape; a restarted broker's counters start
again at 0 (each incarnation's last value is added)."""
import collections, datetime, glob, json, re, sys

d = sys.argv[1]
bucket = collections.defaultdict(lambda: collections.Counter())  # 2-s bucket -> name -> increase
totals = collections.Counter()
t_first = None
series = {}
for f in sorted(glob.glob(d + '/scrape/*.txt')):
    name = f.split('/')[-1][:-4]
    samples = []
    cur = None
    for line in open(f):
        if line.startswith('T '):
            cur = {'t': float(line.split()[1])}; samples.append(cur); continue
        if cur is None or not line.startswith('drip_'):
            continue
        m = re.match(r'(\S+?)(\{[^}]*\})? (\S+)$', line.strip())
        if not m:
            continue
        key = m.group(1) + (m.group(2) or '')
        key = key.replace('drip_predicate_index_rebuild_duration_seconds_', 'rebuild_').replace('drip_', '')
        cur[key] = float(m.group(3))
    series[name] = samples
    if samples:
        t_first = min(t_first or samples[0]['t'], samples[0]['t'])
keys = ['rebuild_count{kind="full"}', 'rebuild_count{kind="partial"}', 'rebuild_sum{kind="full"}',
        'rebuild_sum{kind="partial"}', 'predicate_advertisements_total']
for name, samples in series.items():
    prev = {}
    for s in samples:
        b = int((s['t'] - t_first) // 10) * 10
        for k in keys:
            if k not in s:
                continue
            p = prev.get(k, 0.0)
            inc = s[k] - p if s[k] >= p else s[k]  # a restart starts again at 0
            bucket[b][k] += inc
            totals[k] += inc
            prev[k] = s[k]
short = {keys[0]: 'full', keys[1]: 'partial', keys[2]: 'full_s', keys[3]: 'partial_s', keys[4]: 'ads'}
print(f"{d}: all brokers, from the first scrape at {datetime.datetime.utcfromtimestamp(t_first):%H:%M:%S} UTC")
print('  totals: ' + ', '.join(f"{short[k]} {totals[k]:.1f}" for k in keys))
print('  per 10 s (t: full partial full_s partial_s ads):')
for b in sorted(bucket):
    c = bucket[b]
    print(f"   {b:4d}: {c[keys[0]]:5.0f} {c[keys[1]]:5.0f} {c[keys[2]]:7.2f} {c[keys[3]]:7.2f} {c[keys[4]]:5.0f}")
downs = collections.Counter(); when = []
for f in glob.glob(d + '/keep/*/drip-s*.log'):
    for line in open(f):
        if '"adjacency down"' in line:
            j = json.loads(line)
            downs[j.get('reason')] += 1
            if j.get('reason') != 'shutdown':
                ts = datetime.datetime.fromisoformat(j['ts'].replace('Z', '+00:00')).timestamp()
                when.append(round(ts - t_first, 1))
print('  adjacencies down by reason:', dict(downs), '; not at shutdown, s from first scrape:', sorted(when)[:40])
