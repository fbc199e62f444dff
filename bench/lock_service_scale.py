#!/usr/bin/env python3
"""Lock-service scale check: one session takes N locks, W connections wait on
1000 of them, then a fresh client must still be served promptly and a release
must hand over at once. Not run by ctest (it needs ~10k file descriptors).

Usage: start a server first, e.g.
  build/lockcached --port 22130 --lock_port 22131 --max_connections 15000 &
  python3 bench/lock_service_scale.py $(pgrep -f 'port 22130') 10000 1000000
Measured on the 2-core development machine (2026-11-22): 1M locks taken in
2.2 s, RSS 181 MB; with 10000 waiters a new client's lock+stats answered in
4.3 ms and an unlock handed over to the first waiter in 0.4 ms; RSS 192 MB.
"""
import socket
import sys
import threading
import time

P = 22131; pid=int(sys.argv[1]); W=int(sys.argv[2]); N=int(sys.argv[3])
def rss():
    for line in open("/proc/%d/status"%pid):
        if line.startswith("VmRSS"): return int(line.split()[1])//1024

h=socket.create_connection(("127.0.0.1",P))
t=time.time(); batch=[]
got={"buf":b""}
def reader():
    tail=b""; n=0
    while True:
        d=h.recv(1<<20); tail=(tail+d)[-64:]; n+=d.count(b"200 Acquired")
        if tail.endswith(b"END\r\n"): break
    got["buf"]=tail; got["n"]=n
rt=threading.Thread(target=reader); rt.start()
for i in range(N):
    batch.append(b"lock name%d\r\n"%i)
    if len(batch)==20000: h.sendall(b"".join(batch)); batch=[]
h.sendall(b"".join(batch)+b"stats\r\n"); rt.join(); buf=b"200 Acquired"*got["n"]
print("%d locks in %.1fs, RSS %d MB"%(N, time.time()-t, rss()), buf.count(b"200 Acquired"))
ws=[]
for i in range(W):
    c=socket.create_connection(("127.0.0.1",P)); c.sendall(b"lock name%d 60\r\n"%(i%1000)); ws.append(c)

o=socket.create_connection(("127.0.0.1",P))
time.sleep(1)
t=time.time(); o.sendall(b"lock other\r\nstats\r\n"); buf=b""
while not buf.endswith(b"END\r\n"): buf+=o.recv(1<<16)
print("other client served in %.1f ms"%((time.time()-t)*1000)); print(buf.decode())
t=time.time(); h.sendall(b"unlock name0\r\n"); print(h.recv(100), ws[0].recv(100), "handover %.1f ms"%((time.time()-t)*1000))
print("RSS %d MB"%rss())
