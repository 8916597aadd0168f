#!/usr/bin/env python3
"""leaks.py: the allocations live when the relay was killed, one record per heaptrack stack.

Parses `heaptrack_print -l 1 …` output (each "<size> leaked over <n> calls from:" block and its
frames), demangles the frames (`swift demangle --simplified --compact`) and writes them as JSON
to LEAKS.json: [{"bytes": …, "calls": …, "frames": [leaf first, …]}, …] (categorize.py reads it).

Usage: leaks.py LEAKS
  LEAKS: the heaptrack_print output file, e.g. $OUT_ROOT/heap-TAG/leaks.txt; a directory means
  DIR/leaks.txt, and a bare TAG means $OUT_ROOT/heap-TAG/leaks.txt (OUT_ROOT default /tmp/relay-memory).

Prints: "<blocks> blocks <total> MB".
"""
import json, os, re, subprocess, sys

if len(sys.argv) != 2:
    sys.exit(__doc__.split('\n\n')[2].strip())
path = sys.argv[1]
if os.path.isdir(path):
    path = os.path.join(path, 'leaks.txt')
elif not os.path.exists(path) and os.sep not in path:
    path = os.path.join(os.environ.get('OUT_ROOT', '/tmp/relay-memory'), f'heap-{path}', 'leaks.txt')
units = {'B': 1, 'K': 1024, 'M': 1024**2, 'G': 1024**3}
def size(s):
    m = re.match(r'([\d.]+)([BKMG])', s); return float(m.group(1)) * units[m.group(2)]
blocks = []; cur = None
for line in open(path, errors='replace'):
    m = re.match(r'^(\S+) leaked over (\d+) calls from:$', line.rstrip())
    if m:
        cur = {'bytes': size(m.group(1)), 'calls': int(m.group(2)), 'frames': []}; blocks.append(cur); continue
    if re.match(r'^\S+ leaked over', line): cur = None; continue
    if cur is not None:
        m2 = re.match(r'^    (\S.*)$', line.rstrip())
        if m2 and not m2.group(1).startswith(('at ', 'in ')): cur['frames'].append(m2.group(1))
syms = sorted({f for b in blocks for f in b['frames']})
out = subprocess.run(['swift', 'demangle', '--simplified', '--compact'], input='\n'.join(syms), capture_output=True, text=True).stdout.split('\n')
dem = dict(zip(syms, out))
for b in blocks: b['frames'] = [dem.get(f, f) for f in b['frames']]
json.dump(blocks, open(path + '.json', 'w'))
print(len(blocks), 'blocks', sum(b['bytes'] for b in blocks) / 1e6, 'MB')
