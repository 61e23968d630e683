# emu_mma_rows.py: a CPU emulation of src/cuda/matmul_mma_rows.cu (written 2026-12-04 without a device): every
# warp's 16-byte copy pieces into its stage (weights 2-byte aligned, pieces across the tensor's ends byte by byte),
# the stage layout, each lane's A / B fragment words and scales as the kernel reads them, mma.sync m16n8k32's
# fragment semantics (exact integer sums), the f32 terms and the two-level tree, against the canonical order
# (matmul_igemm.cu's top comment) computed straight from the Q8_0 bytes and the 8-bit rows. It checks the index
# math, not the hardware: a pass here and differing bits on the device point at synchronisation or the PTX.
# Run: python emu_mma_rows.py (numpy; ~1 s). Mutating an offset or the tree makes it report FAILURES.
import numpy as np, sys
rng = np.random.default_rng(1)
f32 = np.float32
def pad(b):
    while (b // 4) % 8 != 4: b += 16
    return b
def geom(KS):
    NBL = 8 // KS
    PW = (14 + 34 * NBL + 15) // 16; PA = (12 + 36 * NBL + 15) // 16
    return NBL, PW, PA, pad(16 * max(PW, PA))
def tree(v):
    if len(v) == 1: return v[0]
    h = len(v) // 2
    return f32(tree(v[:h]) + tree(v[h:]))
def run(n_in, n_out, n_rows, off, MT, KS):
    NT = 1 if n_rows <= 8 else 2
    rb = 34 * n_in // 32
    base = 256  # allocation base address (256-aligned), weights start off rows in
    total = (n_out + off) * rb
    mem = np.zeros(base + total + 64, np.uint8)
    wq = rng.integers(-127, 128, size=(n_out + off, n_in // 32, 32)).astype(np.int8)
    wd = (rng.random((n_out + off, n_in // 32)) * 0.01 + 0.001).astype(np.float16)
    for o in range(n_out + off):
        for b in range(n_in // 32):
            a = base + o * rb + 34 * b
            mem[a:a+2] = np.frombuffer(wd[o, b].tobytes(), np.uint8)
            mem[a+2:a+34] = wq[o, b].view(np.uint8)
    w_lo = base + off * rb; w_end = base + total
    nb_all = n_in // 32; nchunks = (nb_all + 7) // 8
    # xq: chunk-major, 304 bytes a chunk-row, at address X (256-aligned)
    xqq = rng.integers(-127, 128, size=(n_rows, nb_all, 32)).astype(np.int8)
    xqd = (rng.random((n_rows, nb_all)) * 0.05).astype(f32)
    X = 1 << 20
    xmem = np.zeros(nchunks * n_rows * 304, np.uint8)
    for r in range(n_rows):
        for b in range(nb_all):
            c = b // 8; a = (c * n_rows + r) * 304 + (b % 8) * 36
            xmem[a:a+4] = np.frombuffer(xqd[r, b].tobytes(), np.uint8)
            xmem[a+4:a+36] = xqq[r, b].view(np.uint8)
    # reference: canonical order
    ref = np.zeros((n_rows, n_out), f32)
    for r in range(n_rows):
        for o in range(n_out):
            p = [f32(0)] * 8
            for b in range(nb_all):
                isum = int(np.dot(wq[o + off, b].astype(np.int64), xqq[r, b].astype(np.int64)))
                t = f32(f32(f32(wd[o + off, b]) * xqd[r, b]) * f32(isum))
                p[b % 8] = f32(p[b % 8] + t)
            ref[r, o] = tree(p)
    NBL, PW, PA, RS = geom(KS)
    WR = 16 * MT; SB = (WR + 8 * NT) * RS
    m_count = min(n_rows, 8 * NT)
    opb = WR * (8 // KS)
    y = np.full((n_rows, n_out), np.nan, f32)
    wdev = w_lo  # p.w
    for blk in range((n_out + opb - 1) // opb):
        red = {}
        for warp in range(8):
            q, grp = warp % KS, warp // KS
            n0 = (blk * (8 // KS) + grp) * WR
            wb0 = q * NBL * 34; xb0 = q * NBL * 36
            acc = np.zeros((MT, NT, NBL, 32, 4), f32)
            for c in range(nchunks):
                st = np.full(SB, 0xAB, np.uint8)
                nb = min(NBL, max(0, min(8, nb_all - 8 * c) - q * NBL))
                if nb:
                    wspan, xspan = nb * 34, nb * 36
                    for r in range(WR):
                        o = n0 + r
                        if o >= n_out: continue
                        src = wdev + o * rb + c * 272 + wb0
                        for pc in range(PW):
                            pq = (src & ~15) + 16 * pc
                            if pq >= src + wspan: continue
                            d = r * RS + 16 * pc
                            assert d + 16 <= r * RS + RS
                            for i in range(16):
                                if w_lo <= pq + i < w_end: st[d + i] = mem[pq + i]
                    for r in range(m_count):
                        src = X + (c * n_rows + r) * 304 + xb0
                        for pc in range(PA):
                            pq = (src & ~15) + 16 * pc
                            if pq >= src + xspan: continue
                            assert pq + 16 <= X + (c * n_rows + r) * 304 + 304
                            d = (WR + r) * RS + 16 * pc
                            st[d:d+16] = xmem[pq - X:pq - X + 16]
                xo = xb0 & 15
                xs = WR * RS + xo
                for bl in range(NBL):
                    if bl >= nb: break
                    for mt in range(MT):
                        for nt in range(NT):
                            A = np.zeros((16, 32), np.int64); Bm = np.zeros((32, 8), np.int64)
                            dwl = {}; xdl = {}
                            for lane in range(32):
                                g, tig = lane >> 2, lane & 3
                                wo0 = (wdev + (n0 + 16*mt + g) * rb + wb0) & 15
                                wo1 = (wdev + (n0 + 16*mt + g + 8) * rb + wb0) & 15
                                w0 = (16*mt + g) * RS + wo0 + 34 * bl; w1 = (16*mt + g + 8) * RS + wo1 + 34 * bl
                                def word(a): return st[a:a+4].view(np.int8).astype(np.int64)
                                A[g, 4*tig:4*tig+4] = word(w0 + 2 + 4*tig); A[g+8, 4*tig:4*tig+4] = word(w1 + 2 + 4*tig)
                                A[g, 16+4*tig:20+4*tig] = word(w0 + 18 + 4*tig); A[g+8, 16+4*tig:20+4*tig] = word(w1 + 18 + 4*tig)
                                xr = xs + (8*nt + g) * RS + 36 * bl
                                Bm[4*tig:4*tig+4, g] = word(xr + 4 + 4*tig); Bm[16+4*tig:20+4*tig, g] = word(xr + 20 + 4*tig)
                                dwl[lane] = (st[w0:w0+2].view(np.float16)[0].astype(f32), st[w1:w1+2].view(np.float16)[0].astype(f32))
                                a0 = xs + (8*nt + 2*tig) * RS + 36*bl; a1 = xs + (8*nt + 2*tig + 1) * RS + 36*bl
                                xdl[lane] = (st[a0:a0+4].view(f32)[0], st[a1:a1+4].view(f32)[0])
                            C = A @ Bm
                            for lane in range(32):
                                g, tig = lane >> 2, lane & 3
                                cc = [C[g, 2*tig], C[g, 2*tig+1], C[g+8, 2*tig], C[g+8, 2*tig+1]]
                                dw0, dw1 = dwl[lane]; xd0, xd1 = xdl[lane]
                                with np.errstate(all='ignore'):
                                    for k, (dw, xd) in enumerate([(dw0, xd0), (dw0, xd1), (dw1, xd0), (dw1, xd1)]):
                                        acc[mt, nt, bl, lane, k] = f32(acc[mt, nt, bl, lane, k] + f32(f32(dw * xd) * f32(cc[k])))
            for mt in range(MT):
                for nt in range(NT):
                    for lane in range(32):
                        for k in range(4):
                            red[(warp, mt, nt, lane, k)] = tree([acc[mt, nt, j, lane, k] for j in range(NBL)])
        for warp in range(8):
            q, grp = warp % KS, warp // KS
            if q: continue
            n0 = (blk * (8 // KS) + grp) * WR
            for mt in range(MT):
                for nt in range(NT):
                    for lane in range(32):
                        g, tig = lane >> 2, lane & 3
                        for k in range(4):
                            v = [red[(grp * KS + j, mt, nt, lane, k)] for j in range(KS)]
                            o = n0 + 16*mt + g + (8 if k >= 2 else 0); r = 8*nt + 2*tig + (k & 1)
                            if o < n_out and r < m_count: y[r, o] = tree(v)
    ok = np.array_equal(y.view(np.uint32), ref.view(np.uint32))
    print(f"n_in {n_in} n_out {n_out} rows {n_rows} off {off} MT {MT} KS {KS}: {'bit-identical' if ok else 'DIFFER'}"
          f" ({np.sum(y.view(np.uint32) != ref.view(np.uint32))} differ, {np.isnan(y).sum()} NaN)")
    return ok
cases = [(608, 45, 3, 0, 1, 8), (608, 45, 2, 3, 1, 8), (96, 130, 9, 1, 1, 8), (800, 40, 5, 0, 2, 4),
         (64, 70, 16, 0, 2, 2), (608, 33, 11, 1, 2, 2), (512, 64, 1, 0, 2, 8), (800, 45, 16, 1, 2, 4)]
allok = all(run(*c) for c in cases)
print("ALL OK" if allok else "FAILURES")
