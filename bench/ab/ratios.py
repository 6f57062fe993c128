import re,sys
txt=open(sys.argv[1]).read(); a,b=sys.argv[2],sys.argv[3]
runs=re.findall(r'== (\w+) round (\d+)\n((?:.*ops/s.*\n){4})',txt)
data={}
for name,r,body in runs:
    for w,ops in re.findall(r'\s*([a-z-]+):\s+(\d+) ops/s',body):
        data[(name,int(r),w)]=int(ops)
rounds=sorted({int(r) for _,r,_ in runs})
for w in ['put-heavy','get-heavy','delete-heavy','balanced']:
    ratios=[data[(b,r,w)]/data[(a,r,w)] for r in rounds if (b,r,w) in data and (a,r,w) in data]
    rs=sorted(ratios); n=len(rs)
    med=rs[n//2] if n%2 else (rs[n//2-1]+rs[n//2])/2
    ma=sorted(data[(a,r,w)] for r in rounds if (a,r,w) in data); mb=sorted(data[(b,r,w)] for r in rounds if (b,r,w) in data)
    print(f"| {w} | {ma[len(ma)//2]:,} | {mb[len(mb)//2]:,} | {' '.join(f'{x:.2f}' for x in ratios)} | {med:.2f} |")
