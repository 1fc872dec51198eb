#!/usr/bin/env python3
"""Draws a training run's metrics.csv (written by `actorps train/local` into
log_dir) as a PNG: loss and accuracy per epoch, train and test.

Usage: python3 tools/plot_metrics.py LOG_DIR/metrics.csv OUT.png
Needs python3-matplotlib (tools/setup.sh --all installs it)."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    path, out = argv[1], argv[2]
    rows = []
    with open(path, newline="") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            try:
                rows.append({k: float(v) if v else None for k, v in row.items()})
            except (TypeError, ValueError) as e:
                sys.exit(f"{path}:{line}: not a number: {e}")
    if not rows:
        sys.exit(f"{path}: no epochs yet")
    epochs = [r["epoch"] for r in rows]
    fig, (loss, acc) = plt.subplots(1, 2, figsize=(10, 4))
    for ax, metric in ((loss, "loss"), (acc, "accuracy")):
        for split in ("train", "test"):
            ys = [r[f"{split}_{metric}"] for r in rows]
            if any(y is not None for y in ys):
                ax.plot(epochs, ys, marker="o", label=split)
        ax.set_xlabel("epoch")
        ax.set_title(metric)
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(f"wrote {out} ({len(rows)} epochs)")


if __name__ == "__main__":
    main(sys.argv)
