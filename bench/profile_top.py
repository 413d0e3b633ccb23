"""Top entries of a py-spy raw (collapsed stacks) profile: by own samples and by
samples with the function anywhere on the stack.

Usage: .venv/bin/python bench/profile_top.py PROFILE.txt [--top 25]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter

_LINE = re.compile(r"^(.*) (\d+)$")
_NUMBER = re.compile(r":\d+\)")


def frame_name(frame: str) -> str:
    """`func (path/to/file.py:123)` -> `func (file.py)`: lines merged per function."""
    frame = _NUMBER.sub(")", frame)
    name, _, where = frame.partition(" (")
    return f"{name} ({where.rsplit('/', 1)[-1]}" if where else name


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("profile")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--only", help="keep stacks with a frame containing this (e.g. Server.run)")
    ap.add_argument(
        "--skip-leaf", action="append", default=[],
        help="drop stacks whose leaf contains this (e.g. EpollSelector.select: idle)",
    )  # fmt: skip
    args = ap.parse_args()
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    with open(args.profile) as f:
        for line in f:
            m = _LINE.match(line.rstrip("\n"))
            if not m:
                continue
            frames = [frame_name(x) for x in m.group(1).split(";")]
            n = int(m.group(2))
            if args.only and not any(args.only in f for f in frames):
                continue
            if any(skip in frames[-1] for skip in args.skip_leaf):
                continue
            samples += n
            own[frames[-1]] += n
            for name in set(frames):
                total[name] += n
    print(f"{samples} samples")
    print("-- own time (leaf frame) --")
    for name, n in own.most_common(args.top):
        print(f"{100 * n / samples:5.1f}%  {name}")
    print("-- total time (anywhere on the stack) --")
    for name, n in total.most_common(args.top):
        print(f"{100 * n / samples:5.1f}%  {name}")


if __name__ == "__main__":
    main()
