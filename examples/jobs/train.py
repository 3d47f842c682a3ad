#!/usr/bin/env python3
"""Data-parallel training of a linear model, one process per rank, launched by `srun`.

Each rank reads its identity from Slurm's task environment (SLURM_PROCID, SLURM_NTASKS,
SLURM_LOCALID, SLURM_NODEID), fits its own shard of a synthetic regression problem, and averages
gradients with the other ranks every step through files in a shared rendezvous directory (a
file-system all-reduce: the CPU stand-in for NCCL's). Rank 0 writes the model and the loss curve.
Usage: train.py --rendezvous DIR [--steps N] [--out FILE]
"""
import argparse, json, os, random, socket, sys, time

def shard(rank, n, rows=4000, dim=8):
    rng = random.Random(1234 + rank)
    true_w = [0.5 * (i + 1) * (-1) ** i for i in range(dim)]
    xs, ys = [], []
    for _ in range(rows // n):
        x = [rng.uniform(-1, 1) for _ in range(dim)]
        ys.append(sum(a * b for a, b in zip(true_w, x)) + rng.gauss(0, 0.01))
        xs.append(x)
    return xs, ys, true_w

def allreduce(rdzv, step, rank, n, vec, timeout=120.0):
    tmp = os.path.join(rdzv, f".s{step}-r{rank}.tmp")
    with open(tmp, "w") as f:
        json.dump(vec, f)
    os.rename(tmp, os.path.join(rdzv, f"s{step}-r{rank}.json"))
    deadline = time.time() + timeout
    total = [0.0] * len(vec)
    for r in range(n):
        path = os.path.join(rdzv, f"s{step}-r{r}.json")
        while not os.path.exists(path):
            if time.time() > deadline:
                sys.exit(f"rank {rank}: rank {r} never reached step {step}")
            time.sleep(0.005)
        with open(path) as f:
            for i, v in enumerate(json.load(f)):
                total[i] += v
    return [t / n for t in total]

def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rendezvous", required=True)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--out", default="model.json")
    a = p.parse_args()
    rank = int(os.environ["SLURM_PROCID"]); n = int(os.environ["SLURM_NTASKS"])
    local = os.environ.get("SLURM_LOCALID", "?"); node = os.environ.get("SLURM_NODEID", "?")
    gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    host = os.environ.get("SLURMD_NODENAME", socket.gethostname())
    os.makedirs(a.rendezvous, exist_ok=True)
    print(f"rank {rank}/{n} local {local} node {node} on {host} gpus [{gpus}]", flush=True)
    xs, ys, true_w = shard(rank, n)
    w = [0.0] * len(true_w)
    losses = []
    for step in range(a.steps):
        grad = [0.0] * len(w); loss = 0.0
        for x, y in zip(xs, ys):
            err = sum(wi * xi for wi, xi in zip(w, x)) - y
            loss += err * err
            for i, xi in enumerate(x):
                grad[i] += 2 * err * xi / len(xs)
        g = allreduce(a.rendezvous, step, rank, n, grad + [loss / len(xs)])
        losses.append(g[-1])
        w = [wi - a.lr * gi for wi, gi in zip(w, g[:-1])]
    if rank == 0:
        err = max(abs(a - b) for a, b in zip(w, true_w))
        with open(a.out, "w") as f:
            json.dump({"ranks": n, "steps": a.steps, "loss": losses, "weights": w,
                       "max_weight_error": err}, f)
        print(f"trained {a.steps} steps on {n} ranks: loss {losses[0]:.4f} -> {losses[-1]:.6f}, "
              f"max weight error {err:.4f}", flush=True)
        if losses[-1] > losses[0] / 100:
            sys.exit("training did not converge")

if __name__ == "__main__":
    main()
