"""The K3-width projection of speculative decoding with the released DSpark
drafter (docs/BENCHMARKS.md, "Projection at K3 width"): s/token and GB/token
per preset, plain and with the drafter, from

- the pass costs k3 measured at the real K3 width (docs/BENCHMARKS.md:
  trunk and expert GB per pass per preset from `k3 bench spec`; the disk's
  O_DIRECT speed; compute of verification passes of T positions timed
  resident and scaled to 93 layers; the streamed overlap efficiency), and
- the published mean acceptance of Inferact/Kimi-K3-DSpark in vLLM with 7
  draft tokens (4.73 tokens per pass on coding, 2.61 on creative text),
  turned into a per-position acceptance a by assuming each draft position
  is accepted with the same probability given the ones before:
  tokens per pass with k drafts = (1 - a^(k+1)) / (1 - a).

The drafter itself: 3.56e9 bf16 parameters (7.12 GB), streamed from disk
once per pass at the laptop preset (it does not fit beside the 8 GB plan),
resident elsewhere; its compute 2 flops per parameter per position at
40 GFLOP/s. Run: python3 tools/bench/dspark_projection.py
"""
def alpha_for(L,k=7):
    lo,hi=0.0,0.9999
    for _ in range(100):
        a=(lo+hi)/2
        v=(1-a**(k+1))/(1-a)
        if v<L: lo=a
        else: hi=a
    return a
disk=3.41; eff=0.85
comp={1:26.7,2:50.0,4:98.4,9:211.4}
Ts=sorted(comp)
def C(T):
    """compute seconds of a pass of T positions: linear between the timed T"""
    for lo, hi in zip(Ts, Ts[1:]):
        if T <= hi:
            return comp[lo] + (comp[hi] - comp[lo]) * (T - lo) / (hi - lo)
    return comp[Ts[-1]]
presets={'laptop':(108.8,25.8,True),'desktop':(96.3,25.8,False),'server':(0.0,25.8,False)}
draftGB=7.12  # 3.56e9 params bf16
for name,L in [('coding',4.73),('creative',2.61)]:
    a=alpha_for(L)
    print(f"## {name}: mean {L} tokens per pass at 7 drafts -> per-position acceptance {a:.3f}")
    for p,(tr,ex,streamdraft) in presets.items():
        plain_b=tr+ex; plain_s=max(plain_b/disk,C(1))/eff
        rows=[]
        for k in range(0,8):
            T=k+1
            tok=(1-a**T)/(1-a)
            b=tr+T*ex+(draftGB if (k>0 and streamdraft) else 0)
            dc=2*3.56e9*T/40e9 if k>0 else 0
            s=(max(b/disk,C(T))+dc)/eff
            rb=b/tok
            rows.append((k,tok,b,s/tok,rb))
        best_s=min(rows,key=lambda r:r[3]); best_b=min(rows,key=lambda r:r[4])
        print(f"{p}: plain {plain_s:.1f} s/token {plain_b:.1f} GB/token | best measured-compute k={best_s[0]} {best_s[3]:.1f} s/token ({plain_s/best_s[3]:.2f}x) | read-bound best k={best_b[0]} {best_b[4]:.1f} GB/token ({plain_b/best_b[4]:.2f}x)")
