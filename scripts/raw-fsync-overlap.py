#!/usr/bin/env python3
# scripts/raw-fsync-overlap.py MODE SECONDS [FILE]: the raw device's answer to whether two
# fdatasync calls on one file may overlap usefully. Two threads each write 4 KiB at their own
# advancing offsets and call fdatasync, in a loop; MODE serial takes a lock around each
# fdatasync (syncs one at a time, as the WAL's sync lock does), overlap does not. Prints the
# total syncs per second, the mean and p99 of write + fdatasync.
# Two threads each: pwrite 4 KiB at its own advancing offset + fdatasync, same file, in a loop.
# mode serial: a lock makes the syncs one at a time (write may overlap); mode overlap: no lock.
import os, sys, threading, time
path = sys.argv[3] if len(sys.argv) > 3 else 'raw-fsync-overlap.dat'; secs = float(sys.argv[2]); mode = sys.argv[1]
fd = os.open(path, os.O_RDWR | os.O_CREAT); size = 16 << 20
os.pwrite(fd, b'\0' * size, 0); os.fsync(fd)
lock = threading.Lock(); counts = [0, 0]; lat = [[], []]; stop = time.monotonic() + secs
def run(t):
    n = 0
    while time.monotonic() < stop:
        off = ((n * 2 + t) * 4096) % size
        t0 = time.monotonic()
        os.pwrite(fd, b'\7' * 4096, off)
        if mode == 'serial':
            with lock: os.fdatasync(fd)
        else:
            os.fdatasync(fd)
        lat[t].append(time.monotonic() - t0); n += 1
    counts[t] = n
ths = [threading.Thread(target=run, args=(t,)) for t in range(2)]
[x.start() for x in ths]; [x.join() for x in ths]
os.close(fd); os.unlink(path)
allv = sorted(lat[0] + lat[1])
print(f"{mode}: {sum(counts)/secs:.0f} syncs/s total, mean {sum(allv)/len(allv)*1e6:.0f} us, p99 {allv[int(len(allv)*.99)]*1e3:.2f} ms")
