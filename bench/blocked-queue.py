#!/usr/bin/env python3
"""A job queue on a list with idle blocked clients beside it: IDLE connections loop on BLPOP of
lists nobody pushes to, one worker takes jobs with BLPOP, and one client RPUSHes N jobs one by
one; prints jobs per second. Usage: bench/blocked-queue.py PORT IDLE"""
import redis, threading, time, sys
port=int(sys.argv[1]); idle=int(sys.argv[2]); N=3000
r=redis.Redis(port=port)
r.delete('jobs')
stop=False
def idler(i):
    c=redis.Redis(port=port)
    while not stop:
        c.blpop([f'idle:{i}'],1)
ts=[threading.Thread(target=idler,args=(i,),daemon=True) for i in range(idle)]
[t.start() for t in ts]
time.sleep(1.5)
got=[]
def worker():
    c=redis.Redis(port=port)
    while len(got)<N:
        v=c.blpop(['jobs'],1)
        if v: got.append(v)
w=threading.Thread(target=worker); w.start()
t=time.time()
c=redis.Redis(port=port)
for i in range(N):
    c.rpush('jobs', i)
w.join()
print(port, 'idle waiters', idle, 'jobs/s %.0f'%(N/(time.time()-t)))
stop=True
