"""Record this machine as a hardware fixture: python -m tests.hardware.record tests/fixtures/hardware/NAME."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.hardware.probe import probe
from tests.hardware.machines import RecordingMachine


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folder", type=Path, help="where the recording goes (must be empty or new)")
    args = parser.parse_args(argv)
    if args.folder.exists() and any(args.folder.iterdir()):
        print(f"{args.folder} is not empty; record into a new folder.", file=sys.stderr)
        return 2
    report = probe(RecordingMachine(args.folder))
    print(f"Recorded into {args.folder}: {len(report.gpus)} GPU(s), {len(report.npus)} NPU(s), "
          f"{len(report.ep_devices)} EP device(s), {len(report.errors)} source error(s).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
