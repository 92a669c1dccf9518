# Summary of a register-B kernel timeline (docs/experiments/register_b_timeline.patch): per-SM
# occupancy, k-loop time per k-step by item length, epilogue and empty-tile times, the latest
# and the heaviest items. Usage: python3 timeline.py trace-*.csv
import csv,sys,collections
def load(f):
    R=[]
    for d in csv.DictReader(open(f)):
        R.append({k:int(v) for k,v in d.items()})
    t0=min(r['t0'] for r in R)
    for r in R:
        for k in ('t0','tl','te'): r[k]=(r[k]-t0)/1000.0
        r['steps']=(r['ke']-r['kb']+31)//32
    return R
def an(f):
    R=load(f)
    T=max(r['te'] for r in R)
    busy=[r for r in R if r['steps']>0]
    print(f"== {f}: blocks {len(R)}, busy {len(busy)}, makespan {T:.1f} us, steps {sum(r['steps'] for r in R)}")
    # per SM
    sm=collections.defaultdict(list)
    for r in R: sm[r['sm']].append(r)
    ends=sorted(max(r['te'] for r in v) for v in sm.values())
    print(f"  SMs {len(sm)}; SM last end min/median/max {ends[0]:.1f}/{ends[len(ends)//2]:.1f}/{ends[-1]:.1f}")
    # occupancy-integrated: fraction of time with 0,1,2 blocks per SM
    tot=collections.Counter()
    for s,v in sm.items():
        ev=sorted([(r['t0'],1) for r in v]+[(r['te'],-1) for r in v])
        c=0; last=0
        for t,d in ev:
            tot[c]+=t-last; c+=d; last=t
        tot[c]+=T-last
    S=sum(tot.values()); print("  resident blocks per SM over time:", {k:round(v/S,3) for k,v in sorted(tot.items())})
    # per-step rate: busy time per step, by length bucket
    def co(r):  # mean number of other blocks on same SM during r
        v=sm[r['sm']]; o=0
        for q in v:
            if q is r: continue
            o+=max(0,min(q['te'],r['te'])-max(q['t0'],r['t0']))
        return o/max(1e-9,r['te']-r['t0'])
    b=collections.defaultdict(list)
    for r in busy:
        b[min(r['steps']//16,8)].append(r)
    for k in sorted(b):
        v=b[k]; n=len(v)
        loop=sum(r['tl']-r['t0'] for r in v)/n; ep=sum(r['te']-r['tl'] for r in v)/n
        st=sum(r['steps'] for r in v)/n; c=sum(co(r) for r in v)/n
        print(f"  steps {16*k:3d}-: n {n:4d} mean steps {st:5.1f} loop {loop:6.1f} us ({loop/st:.3f}/step) epilogue {ep:4.1f} co-resident {c:.2f}")
    empt=[r for r in R if r['steps']==0]
    if empt:
        print(f"  empty: n {len(empt)} mean dur {sum(r['te']-r['t0'] for r in empt)/len(empt):.2f} us, first start {min(r['t0'] for r in empt):.1f}, last end {max(r['te'] for r in empt):.1f}")
    # gaps on each SM between end and next start (slot reuse)
    # top 8 latest-ending blocks
    late=sorted(R,key=lambda r:-r['te'])[:6]
    for r in late: print(f"  late: blk {r['block']} tile ({r['row']},{r['col']}) steps {r['steps']} chunk {r['chunk']}/{r['chunks']} t0 {r['t0']:.1f} tl {r['tl']:.1f} te {r['te']:.1f} sm {r['sm']} co {co(r):.2f}")
    heavy=sorted(busy,key=lambda r:-r['steps'])[:6]
    for r in heavy: print(f"  heavy: blk {r['block']} tile ({r['row']},{r['col']}) steps {r['steps']} t0 {r['t0']:.1f} te {r['te']:.1f} {(r['tl']-r['t0'])/r['steps']:.3f}/step co {co(r):.2f}")
    # start time distribution: when does the queue drain
    starts=sorted(r['t0'] for r in R)
    print(f"  last block start {starts[-1]:.1f}; last busy start {max(r['t0'] for r in busy):.1f}")
    # total busy-loop SM-time vs makespan*SMs
    slot_time=sum(r['te']-r['t0'] for r in R)
    print(f"  sum of block durations {slot_time:.0f} us = {slot_time/(264*T):.3f} of 264 slots x makespan")
for f in sys.argv[1:]: an(f)
