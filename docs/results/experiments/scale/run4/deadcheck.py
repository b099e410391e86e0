#!/usr/bin/env python3
"""deadcheck.py RUNDIR: for each adjacency a broker declared dead (no frame from the peer for
the dead interval), how many seconds the *peer* spent in PREDICATES rebuilds, on its clock,
in its scrape intervals overlapping the 4 s before, beside the same for every other broker
at that moment (the baseline of a busy mesh)."""
import bisect, datetime, glob, json, re, statistics, sys

d = sys.argv[1]
ts = lambda s: datetime.datetime.fromisoformat(s.replace('Z', '+00:00')).timestamp()
reb = {}  # broker -> [(t, cumulative rebuild seconds)]
for f in glob.glob(d + '/scrape/*.txt'):
    name = f.split('/')[-1][:-4]; rows = []; t = None; tot = 0.0
    for line in open(f):
        if line.startswith('T '):
            if t is not None: rows.append((t, tot))
            t = float(line.split()[1]); tot = 0.0; continue
        m = re.match(r'drip_predicate_index_rebuild_duration_seconds_sum\{kind="\w+"\} (\S+)', line)
        if m: tot += float(m.group(1))
    if t is not None: rows.append((t, tot))
    reb[name] = rows
ids = {}
topo = glob.glob(d + '/keep/*/drip-topology.yaml')[0]
import yaml
for b in yaml.safe_load(open(topo))['brokers']:
    ids[str(b['id'])] = b['name']; ids[b['name']] = b['name']
def busy(name, t0, t1):
    rows = reb.get(name, [])
    ts_ = [r[0] for r in rows]
    i = max(0, bisect.bisect_left(ts_, t0) - 1); j = min(len(rows) - 1, bisect.bisect_right(ts_, t1))
    if j <= i: return None
    return max(0.0, rows[j][1] - rows[i][1])
peer_busy, others = [], []
for f in glob.glob(d + '/keep/*/drip-s*.log'):
    for line in open(f):
        if '"adjacency down"' in line and '"reason":"dead"' in line:
            j = json.loads(line); t = ts(j['ts']); peer = ids.get(str(j['peer']))
            b = busy(peer, t - 4, t)
            if b is None: continue
            peer_busy.append(b)
            for n in reb:
                if n not in (peer, j['broker']):
                    o = busy(n, t - 4, t)
                    if o is not None: others.append(o)
if peer_busy:
    print(f"{d}: {len(peer_busy)} adjacencies declared dead; the peer's rebuild seconds in the scrape intervals around the 4 s before: "
          f"median {statistics.median(peer_busy):.2f}, mean {statistics.mean(peer_busy):.2f}, ≥ 2 s in {sum(b >= 2 for b in peer_busy)}; "
          f"other brokers at the same moments: median {statistics.median(others):.2f}, mean {statistics.mean(others):.2f}, ≥ 2 s in {100*sum(o >= 2 for o in others)/len(others):.0f}%")
else:
    print(d, 'no dead adjacencies with scrapes around them')
