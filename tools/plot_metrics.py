#!/usr/bin/env python3
"""Draws a training run's metrics.csv (written by `actorps train/local` into
log_dir) as a PNG: loss and accuracy per epoch, train and test, and for a
binary model (test_auc filled in) the test AUC beside them. Empty cells (no
eval set; a softmax model's AUC) and older files without the AUC columns
are left out.

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
    panels = [("loss", ("train", "test")), ("accuracy", ("train", "test"))]
    if any(r.get("test_auc") is not None for r in rows):
        panels.append(("auc", ("test",)))
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4))
    for ax, (metric, splits) in zip(axes, panels):
        for split in splits:
            ys = [r.get(f"{split}_{metric}") for r in rows]
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
