#!/usr/bin/env python3
"""kernel_table.py — every timed candidate of `tsopt tune` records, kernel by kernel: its configuration and its
predicted against measured time (docs/tune-records.md). No GPU needed.

    python3 bench/kernel_table.py OUT/tune/<graph>.json ... | OUT/tune.tar.gz ...

A tune.tar.gz (what bench/h200.sh leaves) is read in place: every tune/<graph>.json inside it."""
import json
import sys
import tarfile


def records(path):
    if path.endswith((".tar.gz", ".tgz")):
        with tarfile.open(path) as tar:
            for member in tar.getmembers():
                if member.name.endswith(".json") and "/tune/" in "/" + member.name:
                    yield member.name, json.load(tar.extractfile(member))
    else:
        with open(path) as f:
            yield path, json.load(f)


def us(seconds):
    return f"{seconds * 1e6:8.1f}" if isinstance(seconds, (int, float)) else f"{'-':>8s}"


def print_record(name, rec):
    print(f"== {rec.get('graph', name)} ({rec.get('gpu', '?')})")
    for cand in rec.get("candidates", []):
        print(f"  {cand.get('plan', '?'):40s} predicted {us(cand.get('predicted_s'))} us  measured "
              f"{us(cand.get('measured_s'))} us  {cand.get('status', '')}")
        for k in cand.get("kernels", []):
            print(f"      {str(k.get('kind', '?')):10s} {str(k.get('config') or ''):34s} predicted "
                  f"{us(k.get('predicted_s'))}  measured {us(k.get('measured_s'))}")


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip())
        return 2
    for path in sys.argv[1:]:
        for name, rec in records(path):
            print_record(name, rec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
