#!/usr/bin/env python3
"""adbytes.py RUNDIR...: predicate advertisements sent mesh wide, by form (whole, delta), in
count and bytes, and the originations, from the last of run4/run.sh's scrapes of each broker."""
import glob,re,sys
for d in sys.argv[1:]:
    tot={}
    for f in glob.glob(d+'/scrape/*.txt'):
        last={}
        for line in open(f):
            m=re.match(r'drip_predicate_advertisement(s_sent_total|_sent_bytes_total)\{form="(\w+)"\} (\S+)',line)
            if m: last[(m.group(1),m.group(2))]=float(m.group(3))
            m=re.match(r'drip_predicate_advertisements_total (\S+)',line)
            if m: last[('orig','')]=float(m.group(1))
        for k,v in last.items(): tot[k]=tot.get(k,0)+v
    print(d); 
    for k in sorted(tot): print('  ',k, f"{tot[k]:,.0f}")
