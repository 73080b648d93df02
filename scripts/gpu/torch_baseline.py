#!/usr/bin/env python3
"""PyTorch beside Lockstep's kernels bench (bench/benches/kernels.rs), on one GPU:

- f32 matmul GFLOP/s at the bench's shapes (m = n = k = 512 ... 4096), TF32 off (true f32,
  what Lockstep's tiled product computes), and with TF32 on for information;
- torch.sum's bandwidth over the bench's 1 GiB of f32, and a device-to-device copy's;
- the bench's decode step (embedding, layer norm, tanh MLP with residual, vocabulary
  projection, softmax, argmax fed back on the device) with the same weights, drawn from the
  same seed by the same SplitMix64 stream (ops/decode.rs, Weights::generate): eager and
  through a CUDA graph, in tokens per second.

It first checks that it draws Lockstep's weights (values pinned by the Rust test
`weights_follow_splitmix64_as_the_torch_baseline_draws_them`), then runs the small model from
token 1 for 8 steps and prints its tokens beside the `decode_loop` example's.

Run on the GPU host: python3 scripts/gpu/torch_baseline.py [--reps N]
"""
import argparse
import time

import torch
import torch.nn.functional as F

MASK = (1 << 64) - 1
GOLDEN, MIX1, MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
SMALL, BENCH = (64, 128, 96), (512, 2048, 4096)  # model, hidden, vocab
SEED, FIRST_TOKEN, EPS = 7, 1, 1e-5
# What `cargo run --release -p lockstep-bench --example decode_loop` prints (any device).
LOCKSTEP_SMALL_TOKENS = [51, 29, 54, 82, 82, 82, 82, 82]
# Bits of embed[0], gamma[0], w1[0], b_out[95] of the small model (the Rust test pins them).
PINNED = [0x3D998680, 0x3F7E095A, 0xBD7895C8, 0xBDC24B42]


def splitmix64(x):
    z = (x + GOLDEN) & MASK
    z = ((z ^ (z >> 30)) * MIX1) & MASK
    z = ((z ^ (z >> 27)) * MIX2) & MASK
    return z ^ (z >> 31)


def unit(stream, i):
    return (splitmix64(((stream << 32) + i) & MASK) >> 40) / float(1 << 24)


def signed(c):
    return c - (1 << 64) if c >= 1 << 63 else c


def lshr(z, s):
    """Logical right shift of int64 tensors holding uint64 bits."""
    return (z >> s) & ((1 << (64 - s)) - 1)


def units(stream, n, device):
    """unit(stream, i) for i < n, vectorised: int64 arithmetic wraps like u64's."""
    z = torch.arange(n, dtype=torch.int64, device=device) + signed(((stream << 32) + GOLDEN) & MASK)
    z = (z ^ lshr(z, 30)) * signed(MIX1)
    z = (z ^ lshr(z, 27)) * signed(MIX2)
    z = z ^ lshr(z, 31)
    return lshr(z, 40).to(torch.float32) / float(1 << 24)


def fan_in(n):
    return 1.0 / (1 << -(-(n - 1).bit_length() // 2))


def weights(dims, seed, device):
    model, hidden, vocab = dims

    def draw(t, shape, scale):
        n = 1
        for d in shape:
            n *= d
        u = units(seed * 16 + t, n, device)
        return ((2.0 * u - 1.0) * scale).reshape(shape)

    w = {
        "embed": draw(0, (vocab, model), 1.0),
        "gamma": 1.0 + draw(1, (model,), 0.125),
        "beta": draw(2, (model,), 0.125),
        "w1": draw(3, (hidden, model), fan_in(model)),
        "b1": draw(4, (hidden,), 0.125),
        "w2": draw(5, (model, hidden), fan_in(hidden)),
        "b2": draw(6, (model,), 0.125),
        "w_out": draw(7, (vocab, model), fan_in(model)),
        "b_out": draw(8, (vocab,), 0.125),
    }
    # The vectorised draw against the scalar one, on each tensor's first values.
    for t, name in enumerate(w):
        scale = {"embed": 1.0, "w1": fan_in(model), "w2": fan_in(hidden), "w_out": fan_in(model)}.get(name, 0.125)
        for i in range(8):
            want = torch.tensor((2.0 * unit(seed * 16 + t, i) - 1.0) * scale, dtype=torch.float32)
            if name == "gamma":
                want = torch.tensor(1.0, dtype=torch.float32) + want
            got = w[name].reshape(-1)[i].cpu()
            assert got == want, f"{name}[{i}]: {got} != {want}"
    return w


def step(w, token):
    """One decode step from a one-element int64 token tensor; returns the next one."""
    x = w["embed"].index_select(0, token).squeeze(0)
    ln = F.layer_norm(x, x.shape, w["gamma"], w["beta"], eps=EPS)
    h = torch.tanh(torch.mv(w["w1"], ln) + w["b1"])
    y = torch.mv(w["w2"], h) + w["b2"] + x
    logits = torch.mv(w["w_out"], y) + w["b_out"]
    probs = torch.softmax(logits, 0)
    return torch.argmax(probs).reshape(1)


def timed(fn, reps):
    """Seconds per call of fn, after a warm-up, by CUDA events."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / reps


def matmuls(reps):
    print("torch f32 matmul (m = n = k):")
    for side in (512, 1024, 2048, 4096):
        a = torch.rand(side, side, device="cuda") * 2 - 1
        b = torch.rand(side, side, device="cuda") * 2 - 1
        flops = 2.0 * side**3
        row = []
        for tf32 in (False, True):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            seconds = timed(lambda: torch.mm(a, b), max(2, reps * 512 // side))
            row.append(flops / seconds / 1e9)
        torch.backends.cuda.matmul.allow_tf32 = False
        print(f"  {side:>5}³   f32 {row[0]:>10.1f} GFLOP/s   (tf32 {row[1]:>10.1f})")


def bandwidth(reps):
    n = 1 << 28
    x = torch.rand(n, device="cuda")
    out = torch.empty_like(x)
    total = torch.empty((), device="cuda")
    sum_s = timed(lambda: torch.sum(x, dim=0, out=total), reps)
    copy_s = timed(lambda: out.copy_(x), reps)
    print("reduction of 1.00 GiB of f32:")
    print(f"  torch.sum                   {n * 4 / sum_s / 1e9:>10.1f} GB/s read")
    print(f"  device-to-device copy       {2 * n * 4 / copy_s / 1e9:>10.1f} GB/s read + written")


def decode(dims, reps):
    w = weights(dims, SEED, "cuda")
    token = torch.tensor([FIRST_TOKEN], device="cuda")
    eager_s = timed(lambda: token.copy_(step(w, token)), reps)
    static = torch.tensor([FIRST_TOKEN], device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            static.copy_(step(w, static))
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static.copy_(step(w, static))
    graph_s = timed(graph.replay, reps)
    model, hidden, vocab = dims
    print(f"decode step (model {model}, hidden {hidden}, vocab {vocab}):")
    print(f"  CUDA graph replay           {1 / graph_s:>10.0f} tokens/s")
    print(f"  eager                       {1 / eager_s:>10.0f} tokens/s")


def small_tokens():
    w = weights(SMALL, SEED, "cuda")
    pinned = [w["embed"][0, 0], w["gamma"][0], w["w1"][0, 0], w["b_out"][95]]
    bits = [int(v.cpu().view(torch.int32)) & 0xFFFFFFFF for v in pinned]
    assert bits == PINNED, f"weights drawn differently: {[hex(b) for b in bits]}"
    token, tokens = torch.tensor([FIRST_TOKEN], device="cuda"), []
    for _ in range(8):
        token = step(w, token)
        tokens.append(int(token))
    same = "the same" if tokens == LOCKSTEP_SMALL_TOKENS else "DIFFERENT"
    print(f"small model from token {FIRST_TOKEN}: {tokens}; decode_loop's {LOCKSTEP_SMALL_TOKENS}: {same}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--decode-reps", type=int, default=2000)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"device: {torch.cuda.get_device_name()} (torch {torch.__version__})")
    small_tokens()
    bandwidth(args.reps)
    matmuls(args.reps)
    decode(BENCH, args.decode_reps)


if __name__ == "__main__":
    main()
