#!/usr/bin/env python3
"""An inference replica: scores batches of requests with a fixed linear model and reports
throughput. Runs until stopped (the service owns its lifetime); SIGTERM ends it cleanly."""
import os, random, signal, sys, time

stop = False
def on_term(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, on_term)
name = os.environ.get("SLURM_JOB_NAME", "replica")
rid = os.environ.get("SLURM_JOB_ID", "?")
print(f"replica {rid} of {name} up on {os.environ.get('SLURMD_NODENAME', '?')} "
      f"gpus [{os.environ.get('CUDA_VISIBLE_DEVICES', '')}]", flush=True)
rng = random.Random(int(rid) if rid.isdigit() else 0)
w = [0.1 * i for i in range(16)]
served, t0 = 0, time.time()
while not stop:
    batch = [[rng.random() for _ in w] for _ in range(64)]
    _ = [sum(a * b for a, b in zip(w, x)) for x in batch]
    served += len(batch)
    if served % 6400 == 0:
        print(f"served {served} requests, {served / (time.time() - t0):.0f}/s", flush=True)
    time.sleep(0.01)
print(f"replica {rid} stopping after {served} requests", flush=True)
