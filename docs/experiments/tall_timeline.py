"""Summary of a tall-kernel trace CSV (item,block,row,col,kb,ke,chunk,chunks,sm,t0,tl,te; times in ns),
as docs/experiments/tall_queue_timeline.patch writes it: per launch, the blocks' start and end, the
block-time in k-loops, epilogues and idle, the time per k-step by item length, and the last items.
Usage: python3 docs/experiments/tall_timeline.py TRACE.csv [...]"""
import csv, sys, statistics as st, collections
for path in sys.argv[1:]:
    rows = [r for r in csv.DictReader(open(path)) if int(r['ke']) > int(r['kb'])]
    for r in rows:
        for k in ('t0', 'tl', 'te', 'kb', 'ke', 'block', 'row', 'col', 'chunks'): r[k] = int(r[k])
        r['steps'] = (r['ke'] - r['kb'] + 31) // 32
    t_min = min(r['t0'] for r in rows)
    for r in rows:
        for k in ('t0', 'tl', 'te'): r[k] = (r[k] - t_min) / 1000.0  # µs
    end = max(r['te'] for r in rows)
    blocks = collections.defaultdict(list)
    for r in rows: blocks[r['block']].append(r)
    ends = sorted(max(x['te'] for x in b) for b in blocks.values())
    starts = sorted(min(x['t0'] for x in b) for b in blocks.values())
    loop = sum(r['tl'] - r['t0'] for r in rows); epi = sum(r['te'] - r['tl'] for r in rows)
    steps = sum(r['steps'] for r in rows)
    print(f"== {path}: {len(rows)} compute items on {len(blocks)} blocks, {steps} k-steps; launch {end:.1f} µs")
    print(f"  block first start: median {st.median(starts):.1f}, max {starts[-1]:.1f}; block end: min {ends[0]:.1f}, median {st.median(ends):.1f}, max {ends[-1]:.1f}")
    print(f"  block-time: k-loops {loop:.0f} µs, epilogues {epi:.0f} µs; slots {len(blocks)} x launch = {len(blocks)*end:.0f}; idle {len(blocks)*end-loop-epi:.0f}")
    print(f"  per step over all loops: {loop/steps:.3f} µs; epilogue per item: median {st.median([r['te']-r['tl'] for r in rows]):.2f}, max {max(r['te']-r['tl'] for r in rows):.2f}")
    gaps = []
    for b in blocks.values():
        b.sort(key=lambda x: x['t0'])
        gaps += [b[i+1]['t0'] - b[i]['te'] for i in range(len(b)-1)]
    if gaps: print(f"  gaps between a block's items: sum {sum(gaps):.1f}, max {max(gaps):.2f}")
    by_len = collections.defaultdict(list)
    for r in rows: by_len[min(r['steps'] // 8 * 8, 128)].append((r['tl'] - r['t0']) / r['steps'])
    print("  µs per step by item length (steps//8*8: median, n):", ', '.join(f"{k}:{st.median(v):.3f}/{len(v)}" for k, v in sorted(by_len.items())))
    # first-step latency proxy: time of a loop minus steps × the block's median step rate
    late = sorted(rows, key=lambda r: -r['te'])[:5]
    print("  last items:", '; '.join(f"b{r['block']} ({r['row']},{r['col']}) k{r['kb']}-{r['ke']} ch{r['chunks']} t0 {r['t0']:.1f} te {r['te']:.1f}" for r in late))
    # steps per block against block end
    loads = sorted(((sum(x['steps'] for x in b), max(x['te'] for x in b), len(b)) for b in blocks.values()))
    print(f"  steps per block: min {loads[0][0]}, median {loads[len(loads)//2][0]}, max {loads[-1][0]}; items per block median {st.median([l[2] for l in loads])}")
    # time-binned rate: steps finished per µs across the launch (by item end)
