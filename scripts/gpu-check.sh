#!/bin/sh
# gpu-check.sh: run gpusplit on a machine with NVIDIA GPUs and keep what it says next to
# what NVIDIA's tools say, for docs/performance.md.
#
#   scripts/gpu-check.sh [OUTDIR]        (default: $OUT, else ./gpu-check)
#
# It builds gpusplit (static) and gpusplit-cuda (-tags cuda) unless GPUSPLIT_BIN names a
# directory holding both, then records in OUTDIR (each command's standard error in
# NAME.err and exit status in NAME.status):
#   nvidia-smi.txt, nvidia-smi-topo.txt, nvidia-smi-p2p-{r,w}.txt   the driver's view
#   inventory.json, topo.txt, nccl-topo.xml                         gpusplit's view
#   p2p.txt, p2p.json                                               gpusplit p2p
#   p2pBandwidthLatencyTest.txt, p2p-sample.json (when NVIDIA's cuda-samples
#     p2pBandwidthLatencyTest is on the PATH, or $P2P_SAMPLE names it): the sample, and
#     gpusplit p2p with the sample's copy size (160,000,000 bytes)
#   nvbandwidth.json, p2p-nvbandwidth.json (when nvbandwidth is on the PATH, or
#     $NVBANDWIDTH names it): its copy-engine tests, and gpusplit p2p with its 512 MiB
#   p2p-compare.md   gpusplit's matrices over theirs, cell by cell, as ratios beside the
#                    ratio each figure's conventions predict (python3), for
#                    docs/performance.md
#   torch.txt (when python3 has torch with CUDA)
#   summary.txt                                                     the figures side by side
# It exits with gpusplit p2p's status.
# With one GPU, p2p still checks and measures copies within it and to and from the host.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-${OUT:-./gpu-check}}
mkdir -p "$out"
out=$(cd "$out" && pwd)

bin=${GPUSPLIT_BIN:-}
if [ -z "$bin" ]; then
	bin=$out/bin
	mkdir -p "$bin"
	(cd "$here" && CGO_ENABLED=0 go build -o "$bin/gpusplit" ./cmd/gpusplit &&
		CGO_ENABLED=0 go build -tags cuda -o "$bin/gpusplit-cuda" ./cmd/gpusplit) || {
		echo "gpu-check: building gpusplit failed" >&2
		exit 1
	}
fi
gs=$bin/gpusplit

run() { # run NAME CMD...: stdout to OUTDIR/NAME, stderr beside it, status kept
	name=$1
	shift
	"$@" >"$out/$name" 2>"$out/$name.err"
	echo $? >"$out/$name.status"
}

run nvidia-smi.txt nvidia-smi
run nvidia-smi-topo.txt nvidia-smi topo -m
run nvidia-smi-p2p-r.txt nvidia-smi topo -p2p r
run nvidia-smi-p2p-w.txt nvidia-smi topo -p2p w
run inventory.json "$gs" inventory -o json
run topo.txt "$gs" topo
run nccl-topo.xml "$gs" nccl-topo
run p2p.txt "$gs" p2p
run p2p.json "$gs" p2p -o json
# The reference tools and gpusplit number the GPUs alike when all order them by PCI bus.
export CUDA_DEVICE_ORDER=PCI_BUS_ID
sample=${P2P_SAMPLE:-$(command -v p2pBandwidthLatencyTest 2>/dev/null || true)}
if [ -n "$sample" ]; then
	run p2pBandwidthLatencyTest.txt "$sample"
	# The sample's copies: 40,000,000 ints. --sizes 4K keeps the integrity check short;
	# p2p.txt has the full one.
	run p2p-sample.json "$gs" p2p -o json --sizes 4K --size 160000000
fi
nvb=${NVBANDWIDTH:-$(command -v nvbandwidth 2>/dev/null || true)}
if [ -n "$nvb" ]; then
	run nvbandwidth.json "$nvb" -j -t host_to_device_memcpy_ce device_to_host_memcpy_ce \
		device_to_device_memcpy_write_ce device_to_device_bidirectional_memcpy_write_ce device_local_copy
	run p2p-nvbandwidth.json "$gs" p2p -o json --sizes 4K --size 512M
fi
if [ -n "$sample$nvb" ]; then
	if command -v python3 >/dev/null 2>&1; then
		python3 - "$out" >"$out/p2p-compare.md" 2>"$out/p2p-compare.md.err" <<'PY'
# gpusplit p2p's matrices over p2pBandwidthLatencyTest's and nvbandwidth's, cell by cell.
# "expected" is the ratio the tools' conventions give for the same copies (docs/p2p.md):
# 1, except nvbandwidth's device_local_copy (it counts the bytes once: 2) and its
# bidirectional figure for the measured direction alone (2 when the directions are even).
import json, os, re, statistics, sys

out = sys.argv[1]


def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def gpusplit(doc):
    """gpusplit's figures as matrices by name, the GPUs in the report's order."""
    idx = {g["address"]: i for i, g in enumerate(doc["gpus"])}
    n = len(idx)
    m = {}
    for p in doc["pairs"]:
        i, j = idx[p["src"]], idx[p["dst"]]
        for key, name in (("unidirectional_gbps", "uni"), ("bidirectional_gbps", "bi"),
                          ("latency_us", "lat"), ("host_latency_us", "cpu")):
            for state in ("disabled", "enabled"):
                grid = m.setdefault(name + " " + state, [[None] * n for _ in range(n)])
                grid[i][j] = (p.get(key) or {}).get(state) or None
    m["h2d"] = [[h["host_to_device_gbps"] for h in doc["host"]]]
    m["d2h"] = [[h["device_to_host_gbps"] for h in doc["host"]]]
    return m, n


def sample(text):
    """p2pBandwidthLatencyTest's matrices by name, rows in order."""
    titles = [
        (r"Unidirectional P2P=Disabled Bandwidth Matrix", "uni disabled"),
        (r"Unidirectional P2P=Enabled Bandwidth \(P2P Writes\) Matrix", "uni enabled"),
        (r"Bidirectional P2P=Disabled Bandwidth Matrix", "bi disabled"),
        (r"Bidirectional P2P=Enabled Bandwidth Matrix", "bi enabled"),
        (r"P2P=Disabled Latency Matrix", "lat disabled"),
        (r"P2P=Enabled Latency \(P2P Writes\) Matrix", "lat enabled"),
    ]
    m, title, key = {}, None, None
    for line in text.splitlines():
        for pat, name in titles:
            if re.match(pat, line):
                title, key = name, None
        f = line.split()
        if not f or title is None:
            continue
        if f[0] in ("D\\D", "GPU"):
            key = title
            m[key] = []
        elif f[0] == "CPU":
            key = title.replace("lat", "cpu")
            m[key] = []
        elif key and re.fullmatch(r"\d+", f[0]) and len(f) > 1:
            try:
                m[key].append([float(v) for v in f[1:]])
            except ValueError:
                pass
    return m


def nvbandwidth(doc, n):
    """nvbandwidth's matrices by test. A test with several results (v0.8's bidirectional
    one: each direction, then their total) has them one after the other in its
    bandwidth_matrix, n rows each."""
    m = {}
    for t in (doc.get("nvbandwidth") or {}).get("testcases", []):
        rows = [[None if v in ("N/A", "") else float(v) for v in r] for r in t.get("bandwidth_matrix", [])]
        if not rows:
            continue
        h = n if len(rows) >= n and len(rows) % n == 0 and len(rows[0]) == n else len(rows)
        m[t["name"]] = [rows[k:k + h] for k in range(0, len(rows), h)]
    return m


def ratios(ours, theirs, only=None):
    """Cells (i, j, ours/theirs) where both have a figure; only: "diagonal" or "pairs"."""
    cells = []
    for i, row in enumerate(ours):
        for j, v in enumerate(row):
            if only == "diagonal" and i != j or only == "pairs" and i == j:
                continue
            try:
                w = theirs[i][j]
            except (IndexError, TypeError):
                continue
            if v and w:
                cells.append((i, j, v / w))
    return cells


def table(title, rows):
    print(f"\n### {title}\n")
    print("| gpusplit | reference | cells | expected | ratio min | median | max |")
    print("|---|---|---|---|---|---|---|")
    for fig, ref, exp, cells in rows:
        r = [c[2] for c in cells]
        if r:
            print(f"| {fig} | {ref} | {len(r)} | {exp} | {min(r):.3f} | {statistics.median(r):.3f} | {max(r):.3f} |")
        else:
            print(f"| {fig} | {ref} | 0 | {exp} | - | - | - |")
    for fig, ref, exp, cells in rows:
        if len(cells) < 2:
            continue
        rows_n = max(c[0] for c in cells) + 1
        n = max(max(c[0], c[1]) for c in cells) + 1
        grid = {(c[0], c[1]): c[2] for c in cells}
        if rows_n == 1:  # the host's figures: one row, a column per GPU
            print(f"\n{fig} over {ref}, by GPU:\n")
        else:
            print(f"\n{fig} over {ref} (row: source GPU, column: destination):\n")
        print("| | " + " | ".join(f"GPU{j}" for j in range(n)) + " |")
        print("|---" * (n + 1) + "|")
        for i in range(rows_n):
            label = "host" if rows_n == 1 else f"GPU{i}"
            print(f"| {label} | " + " | ".join(f"{grid[(i, j)]:.3f}" if (i, j) in grid else "-" for j in range(n)) + " |")


print("## gpusplit p2p beside NVIDIA's tools, on the same GPUs")
doc = load("p2p-sample.json")
if doc and os.path.exists(os.path.join(out, "p2pBandwidthLatencyTest.txt")):
    g, n = gpusplit(doc)
    with open(os.path.join(out, "p2pBandwidthLatencyTest.txt")) as f:
        s = sample(f.read())
    rows = []
    for key, fig in (("uni disabled", "unidirectional, P2P disabled"), ("uni enabled", "unidirectional, P2P enabled"),
                     ("bi disabled", "bidirectional, P2P disabled"), ("bi enabled", "bidirectional, P2P enabled"),
                     ("lat disabled", "GPU latency, P2P disabled"), ("lat enabled", "GPU latency, P2P enabled"),
                     ("cpu disabled", "CPU latency, P2P disabled"), ("cpu enabled", "CPU latency, P2P enabled")):
        rows.append((fig, "the sample's " + fig, "1", ratios(g.get(key, []), s.get(key, []))))
    table("p2pBandwidthLatencyTest, 160,000,000-byte copies", rows)
doc, nvb = load("p2p-nvbandwidth.json"), load("nvbandwidth.json")
if doc and nvb:
    g, n = gpusplit(doc)
    v = nvbandwidth(nvb, n)
    first = lambda name: (v.get(name) or [[]])[0]
    rows = [("unidirectional, P2P enabled", "device_to_device_memcpy_write_ce", "1",
             ratios(g["uni enabled"], first("device_to_device_memcpy_write_ce"), "pairs"))]
    bi = v.get("device_to_device_bidirectional_memcpy_write_ce") or [[]]
    if len(bi) >= 3:
        rows.append(("bidirectional, P2P enabled", "device_to_device_bidirectional_memcpy_write_ce, Total", "1",
                     ratios(g["bi enabled"], bi[-1], "pairs")))
    rows.append(("bidirectional, P2P enabled", "device_to_device_bidirectional_memcpy_write_ce, measured direction", "2",
                 ratios(g["bi enabled"], bi[0], "pairs")))
    local = first("device_local_copy")
    diag = [[(local[0][j] if local and i == j and j < len(local[0]) else None) for j in range(n)] for i in range(n)]
    rows.append(("within a GPU (diagonal), P2P enabled", "device_local_copy", "2", ratios(g["uni enabled"], diag, "diagonal")))
    rows.append(("host to GPU", "host_to_device_memcpy_ce", "1", ratios(g["h2d"], first("host_to_device_memcpy_ce"))))
    rows.append(("GPU to host", "device_to_host_memcpy_ce", "1", ratios(g["d2h"], first("device_to_host_memcpy_ce"))))
    table("nvbandwidth, 512 MiB copies", rows)
PY
	else
		echo "python3 is missing: no comparison" >"$out/p2p-compare.md"
	fi
fi
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
	run torch.txt python3 - <<'EOF'
# Copy bandwidth as PyTorch sees it: 256 MiB copies timed by CUDA events, median of 5
# runs of 5 copies after a warm-up; GB = 1e9 bytes, as gpusplit p2p reports.
import statistics, torch
n = 256 << 20
def bw(dst, src):
    dst.copy_(src); torch.cuda.synchronize()
    vals = []
    for _ in range(5):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(5):
            dst.copy_(src, non_blocking=True)
        e.record(); e.synchronize()
        vals.append(5 * n / (s.elapsed_time(e) / 1e3) / 1e9)
    return statistics.median(vals)
g = torch.cuda.device_count()
for i in range(g):
    with torch.cuda.device(i):
        h = torch.empty(n, dtype=torch.uint8, pin_memory=True)
        d = torch.empty(n, dtype=torch.uint8, device=i)
        print(f"GPU{i} host->GPU {bw(d, h):.2f} GB/s  GPU->host {bw(h, d):.2f} GB/s")
        print(f"GPU{i} within {bw(torch.empty_like(d), d):.2f} GB/s")
for i in range(g):
    for j in range(g):
        if i != j:
            a = torch.empty(n, dtype=torch.uint8, device=i)
            b = torch.empty(n, dtype=torch.uint8, device=j)
            print(f"GPU{i} -> GPU{j} {bw(b, a):.2f} GB/s (peer access {torch.cuda.can_device_access_peer(i, j)})")
EOF
fi

{
	echo "gpu-check on $(hostname) at $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "gpusplit: $("$gs" --version 2>&1)"
	head -n 20 "$out/nvidia-smi.txt" 2>/dev/null | grep -E "Driver Version|NVIDIA" | head -n 4
	echo
	echo "== nvidia-smi topo -m"
	cat "$out/nvidia-smi-topo.txt"
	echo "== gpusplit topo"
	cat "$out/topo.txt"
	echo "== gpusplit p2p (exit status $(cat "$out/p2p.txt.status"))"
	sed -n '/^Unidirectional bandwidth, P2P enabled/,/^NCCL/p' "$out/p2p.txt"
	[ -f "$out/p2p-compare.md" ] && { echo "== gpusplit p2p over p2pBandwidthLatencyTest and nvbandwidth"; cat "$out/p2p-compare.md"; }
	[ -f "$out/torch.txt" ] && { echo "== PyTorch"; cat "$out/torch.txt"; }
} >"$out/summary.txt" 2>&1
cat "$out/summary.txt"
exit "$(cat "$out/p2p.txt.status")"
