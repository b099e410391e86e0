import glob, json, re, sys, collections, datetime
d=sys.argv[1]
keep=glob.glob(d+'/keep/*/')[0]
t0=None
# rebuilds per second across brokers
reb=collections.defaultdict(lambda:[0,0,0.0]); per=collections.Counter(); pertook=collections.Counter()
adj=collections.Counter(); kinds=collections.Counter(); kindtook=collections.Counter()
for f in glob.glob(keep+'drip-s*.log'):
    name=f.split('drip-')[-1][:-4]
    for line in open(f):
        if '"PREDICATES index rebuilt"' in line or '"adjacency down"' in line:
            j=json.loads(line)
            ts=datetime.datetime.fromisoformat(j['ts'].replace('Z','+00:00')).timestamp()
            if '"adjacency down"' in line: adj[int(ts)]+=1; continue
            s=int(ts); reb[s][0]+=1; reb[s][1]+=j['updates']; reb[s][2]+=j['took']
            per[name]+=1; pertook[name]+=j['took']
            kind='partial' if j.get('partial') else 'full'; kinds[kind]+=1; kindtook[kind]+=j['took']
# scrapes: originated ads and subs per second
ads=collections.Counter(); subs=collections.defaultdict(int)
for f in glob.glob(d+'/scrape/*.txt'):
    prev=None; t=None
    for line in open(f):
        if line.startswith('T '): t=int(float(line.split()[1])); continue
        if line.startswith('drip_predicate_advertisements_total'):
            v=float(line.split()[-1])
            if prev is not None and v>prev: ads[t]+=v-prev
            prev=v
        if line.startswith('drip_subscriptions '):
            subs[t]+=int(float(line.split()[-1]))
secs=sorted(set(reb)|set(ads))
start=min(secs)
print('sec  rebuilds updates took_s(all brokers)  ads_originated  subs(sum of scraped) adjdown')
for s in range(start, max(secs)+1):
    r=reb.get(s,[0,0,0])
    print(f"{s-start:4d} {r[0]:4d} {r[1]:6d} {r[2]:7.2f}   {ads.get(s,0):5.0f}   {subs.get(s,'')}  {adj.get(s,'')}")
print('rebuilds per broker: s0',per['s0'],'s20',per['s20'],'min',min(per.values()),'max',max(per.values()),'total',sum(per.values()))
print('rebuild seconds total', sum(pertook.values()), 's0', pertook['s0'])
print('kinds', dict(kinds), 'took', {k:round(v,2) for k,v in kindtook.items()})
