#!/usr/bin/env python3
"""row.py JSON...: the README's table row of each run (columns as in ../README.md)."""
import json, sys

for path in sys.argv[1:]:
    r = json.load(open(path))
    if r.get('error'):
        print(path, 'ERROR', r['error'][:200]); continue
    s, tot, lat, tb, sm = r['series'], r['totals'], r['latency_ms'], r['testbed'], r['summary']
    send = int(round(r['send_s']))
    sending = [p for p in s if p['t'] < send]
    last = [p for p in sending if p['t'] >= send - 10]
    out10 = sum(p["output"] for p in last) / max(1, len(last))  # sending may outlast the series
    ideal10 = sum(p["ideal"] for p in last) / max(1, len(last))
    win = [p for p in s if 5 <= p['t'] < 25]
    bpm = sum(p.get('busiest_link_Bps', 0) for p in win) / max(1, sum(p['input'] for p in win))
    sat = sm.get('saturation_input', 0)
    print(f"{path}: {r['system']['system']} repl {r['replication'].get('ideal', r['replication'])}")
    print(f"  delivered {100*tot['delivered']/tot['ideal']:.1f}% | before sat {sm['output_over_ideal_before_saturation']:.2f}"
          f"{' (sat. at %.0f)' % sat if sat else ''} | last 10 s {out10:,.0f} ({ideal10:,.0f}) | peak link {100*sm['peak_link_utilisation']:.0f}%"
          f" | bytes/msg {bpm:,.0f} | p50/p99 {lat['p50']:,.0f} / {lat['p99']:,.0f} | settle {r.get('settle_s', 0):.0f} s"
          f" | CPU {tb['machine_cpu_share']:.2f} / {tb.get('brokers_cpu_share', 0):.2f} / {tb['runner_cpu_share']:.2f} / {r['lab']['daemon_cpu_share']:.2f}"
          f" | lost {tot['lost']} fp {tot['false_positives']} dup {tot['duplicates']} | twice-sat {sm.get('output_at_twice_saturation_over_peak')}")
    for f in r.get('faults', []):
        print('  fault', f)
