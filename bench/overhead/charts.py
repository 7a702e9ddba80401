"""PNG charts of an overhead report (matplotlib, imported only when charts are asked for).

`python -m bench.overhead --from-json overhead.json --charts docs` redraws them from a report saved with `--json`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

# matplotlib is an optional bench dependency: where it is missing (the test environment) mypy still checks the rest.
import matplotlib  # type: ignore[import-not-found,unused-ignore]

matplotlib.use("Agg")  # files only: no display on CI or servers

import matplotlib.pyplot as plt  # type: ignore[import-not-found,unused-ignore]  # noqa: E402
from matplotlib.axes import Axes  # type: ignore[import-not-found,unused-ignore]  # noqa: E402
from matplotlib.figure import Figure  # type: ignore[import-not-found,unused-ignore]  # noqa: E402
from matplotlib.ticker import FuncFormatter  # type: ignore[import-not-found,unused-ignore]  # noqa: E402

from .report import DIRECT, Report  # noqa: E402

# Log axes cannot show zero or less: added latencies below this (noise around nothing) sit on it.
FLOOR_MS = 0.01


def _targets(report: Report) -> list[str]:
    seen: list[str] = []
    for row in report.load:
        if row.target not in seen:
            seen.append(row.target)
    return seen


def _plain_log(ax: Axes, axis: str = "y") -> None:
    """A log axis labelled 0.1, 1, 10, 100 rather than 10^-1 ... (readers compare milliseconds)."""
    formatter = FuncFormatter(lambda value, _: f"{value:g}")
    (ax.yaxis if axis == "y" else ax.xaxis).set_major_formatter(formatter)


def _colours(targets: list[str]) -> dict[str, str]:
    palette = ["#444444", "#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    return {t: palette[i % len(palette)] for i, t in enumerate(targets)}


def _body_panel(ax: Axes, body: str, grid: Literal["both", "y"]) -> None:
    """One body's panel of a chart per body: log y axis over the concurrency levels."""
    ax.set_yscale("log")
    _plain_log(ax)
    ax.set_title(f"body {body}")
    ax.set_xlabel("concurrency (connections)")
    ax.grid(True, axis=grid, which="both", alpha=0.3)


def _save_per_body(fig: Figure, first: Axes, ylabel: str, title: str, columns: int, bottom: float, path: Path) -> Path:
    """A chart of one panel per body, `first` the leftmost: its legend under all of them, written to path."""
    first.set_ylabel(ylabel)
    handles, labels = first.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(columns, len(labels)), fontsize=8, frameon=False)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def added_latency(report: Report, path: Path) -> Path:
    bodies = [b["label"] for b in report.bodies]
    targets = [t for t in _targets(report) if t != DIRECT]
    colours = _colours([DIRECT, *targets])
    fig, axes = plt.subplots(1, len(bodies), figsize=(4.2 * len(bodies), 4.2), sharey=True, squeeze=False)
    for ax, body in zip(axes[0], bodies, strict=True):
        for target in targets:
            rows = [r for r in report.load if r.target == target and r.body == body]
            x = [str(r.concurrency) for r in rows]
            for stat, style in (("added_p50_ms", "-o"), ("added_p99_ms", "--^")):
                y = [max(FLOOR_MS, getattr(r, stat) or FLOOR_MS) for r in rows]
                label = f"{target} {stat.split('_')[1]}"
                ax.plot(x, y, style, color=colours[target], label=label, markersize=4)
        _body_panel(ax, body, grid="both")
    ylabel = "added latency vs nginx direct (ms, log)"
    title = "Added latency, p50 (solid) and p99 (dashed): proxy minus calling nginx directly"
    return _save_per_body(fig, axes[0][0], ylabel, title, columns=4, bottom=0.12, path=path)


def throughput(report: Report, path: Path) -> Path:
    bodies = [b["label"] for b in report.bodies]
    targets = _targets(report)
    colours = _colours(targets)
    concurrencies = sorted({r.concurrency for r in report.load})
    fig, axes = plt.subplots(1, len(bodies), figsize=(4.2 * len(bodies), 4.2), sharey=True, squeeze=False)
    width = 0.8 / max(1, len(targets))
    for ax, body in zip(axes[0], bodies, strict=True):
        for i, target in enumerate(targets):
            by_conc = {r.concurrency: r.rps for r in report.load if r.target == target and r.body == body}
            xs = [c + (i - (len(targets) - 1) / 2) * width for c in range(len(concurrencies))]
            ys = [by_conc.get(c, 0.0) for c in concurrencies]
            ax.bar(xs, ys, width, color=colours[target], label=target)
        ax.set_xticks(range(len(concurrencies)), [str(c) for c in concurrencies])
        _body_panel(ax, body, grid="y")
    title = "Throughput on 2 cores (load tool, proxy and nginx share them)"
    return _save_per_body(fig, axes[0][0], "requests per second (log)", title, columns=5, bottom=0.1, path=path)


def first_byte_and_memory(report: Report, path: Path) -> Path:
    bodies = [b["label"] for b in report.bodies]
    targets = _targets(report)
    colours = _colours(targets)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.4))
    # Absolute times, nginx included: an added time near zero has no place on a log axis.
    width = 0.8 / max(1, len(targets))
    for i, target in enumerate(targets):
        by_body = {r.body: r.p50_ms for r in report.first_byte if r.target == target}
        xs = [b + (i - (len(targets) - 1) / 2) * width for b in range(len(bodies))]
        ys = [max(FLOOR_MS, by_body.get(b, 0.0)) for b in bodies]
        left.bar(xs, ys, width, color=colours[target], label=target)
    left.set_xticks(range(len(bodies)), bodies)
    left.set_yscale("log")
    _plain_log(left)
    left.set_xlabel("request body")
    left.set_ylabel("time to the first event, p50 (ms, log)")
    left.set_title("Streaming: request sent to first event received")
    left.grid(True, axis="y", which="both", alpha=0.3)
    left.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=3, frameon=False)
    rows = [r for r in report.memory if r.target in targets]
    names = [r.target for r in rows]
    right.barh(names, [r.peak_mb for r in rows], color=[colours[n] for n in names], label="peak under load (VmHWM)")
    right.barh(
        names, [r.idle_mb for r in rows], color="white", alpha=0.6, hatch="///", edgecolor="grey",
        label="after start-up (VmRSS)",
    )  # fmt: skip
    for y, row in enumerate(rows):
        right.text(row.peak_mb, y, f" {row.peak_mb:.0f}", va="center", fontsize=8)
    right.set_xlim(0, max((r.peak_mb for r in rows), default=1) * 1.15)
    right.invert_yaxis()
    right.set_xlabel("MB")
    right.set_title("Memory of the proxy process")
    right.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def draw(report: Report, directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    return [
        added_latency(report, directory / "overhead-latency.png"),
        throughput(report, directory / "overhead-throughput.png"),
        first_byte_and_memory(report, directory / "overhead-first-byte-memory.png"),
    ]
