"""Small inline SVG plots for the HTML report, drawn by hand (no plotting library, no CDN).

Every function returns one `<svg>` element as text; every label in it is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from html import escape

PALETTE = (
    "#4269d0",
    "#efb118",
    "#ff725c",
    "#6cc5b0",
    "#3ca951",
    "#ff8ab7",
    "#a463f2",
    "#97bbf5",
    "#9c6b4e",
    "#9498a0",
)
DASHES = ("", "7 4", "2 3", "10 3 2 3")
"""Line dash patterns, in turn with the colours."""
W, H = 640, 300
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 28, 70


@dataclass(frozen=True)
class Bar:
    """One bar: its value and, when known, its interval and n."""

    value: float
    low: float | None = None
    high: float | None = None
    n: int | None = None


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _num(x: float) -> str:
    return f"{x:.1f}"


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / count
    step = 10 ** math.floor(math.log10(raw))
    for mult in (1, 2, 2.5, 5, 10):
        if raw <= step * mult:
            step *= mult
            break
    first = math.floor(lo / step) * step
    out, t = [], first
    while t <= hi + step * 1e-9:
        out.append(round(t, 10))
        t += step
    return out


LEGEND_SHORT = 22
"""Legend names up to this long sit four to a row; longer ones get a row each, in full."""
LABEL_CHARS = 24
"""Axis labels are cut to this many characters (the bar's tooltip has the full name)."""
CHAR_W = 6.6
"""About how wide one character of the 11 px axis font is, in px."""


def _frame(title: str, body: str, legend: Sequence[str], label: str = "", height: int = H) -> str:
    per_row = 4 if all(len(n) <= LEGEND_SHORT for n in legend) else 1
    width = 150 if per_row == 4 else W - LEFT
    items = "".join(
        f'<g class="legend" transform="translate({LEFT + 4 + (i % per_row) * width},'
        f'{height + 8 + (i // per_row) * 16})">'
        f'<rect width="10" height="10" fill="{color(i)}"/>'
        f'<text x="14" y="9">{escape(name if per_row == 1 else name[:LEGEND_SHORT])}</text></g>'
        for i, name in enumerate(legend)
    )
    rows = (len(legend) + per_row - 1) // per_row
    total = height + 12 + rows * 16
    return (
        f'<svg class="plot" role="img" viewBox="0 0 {W} {total}" width="{W}" height="{total}" '
        f'xmlns="http://www.w3.org/2000/svg" aria-label="{escape(title)}">'
        f'<text class="ptitle" x="{W // 2}" y="16" text-anchor="middle">{escape(title)}</text>'
        f'<text class="axis" x="12" y="{TOP - 6}">{escape(label)}</text>'
        f"{body}{items}</svg>"
    )


def _x_label(name: str, cx: float, y: float) -> str:
    """An axis label under a group, written upwards (its box is one line wide, so labels
    of neighbouring groups never overlap), cut to `LABEL_CHARS` with the full name kept."""
    short = name if len(name) <= LABEL_CHARS else name[: LABEL_CHARS - 1] + "…"
    return (
        f'<text class="axis xlabel" transform="translate({_num(cx + 4)},{_num(y)}) rotate(-90)" '
        f'text-anchor="end"><title>{escape(name)}</title>{escape(short)}</text>'
    )


def _label_room(names: Sequence[str]) -> int:
    """The height under the plot that the longest (cut) axis label needs."""
    longest = max([0, *(min(len(n), LABEL_CHARS) for n in names)])
    return int(12 + longest * CHAR_W)


def _y_axis(lo: float, hi: float, y: object) -> str:
    out = []
    for t in _ticks(lo, hi):
        if lo - 1e-9 <= t <= hi + 1e-9:
            yy = y(t)  # type: ignore[operator]
            out.append(
                f'<line class="grid" x1="{LEFT}" x2="{W - RIGHT}" y1="{_num(yy)}" y2="{_num(yy)}"/>'
                f'<text class="axis" x="{LEFT - 6}" y="{_num(yy + 4)}" text-anchor="end">'
                f"{t:g}</text>"
            )
    return "".join(out)


def bar_chart(
    title: str,
    groups: Sequence[str],
    series: Sequence[str],
    bars: Mapping[tuple[str, str], Bar],
    *,
    label: str = "",
    y_range: tuple[float, float] | None = None,
) -> str:
    """Grouped bars (one group per entry of `groups`, one colour per series) with interval
    whiskers where a bar has them. Missing (group, series) pairs are left empty. Charts
    meant to be read side by side (small multiples) share one `y_range`."""
    lo, hi = y_range if y_range is not None else bar_range(bars.values())
    room = _label_room(groups)
    height = H - BOTTOM + room
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM

    def y(v: float) -> float:
        return TOP + plot_h * (1 - (v - lo) / (hi - lo))

    gw = plot_w / max(1, len(groups))
    bw = max(2.0, min(28.0, (gw - 8) / max(1, len(series))))
    parts = [_y_axis(lo, hi, y)]
    for gi, g in enumerate(groups):
        x0 = LEFT + gi * gw + (gw - bw * len(series)) / 2
        for si, s in enumerate(series):
            b = bars.get((g, s))
            if b is None or not math.isfinite(b.value):
                continue
            x = x0 + si * bw
            top, base = y(max(b.value, 0.0)), y(min(b.value, 0.0))
            tip = f"{g} · {s}: {b.value:.3f}"
            if b.low is not None and b.high is not None:
                tip += f" [{b.low:.3f}, {b.high:.3f}]"
            if b.n is not None:
                tip += f" (n={b.n})"
            parts.append(
                f'<rect class="bar" x="{_num(x)}" y="{_num(top)}" width="{_num(bw - 1)}" '
                f'height="{_num(max(0.5, base - top))}" fill="{color(si)}">'
                f"<title>{escape(tip)}</title></rect>"
            )
            if b.low is not None and b.high is not None:
                cx = x + (bw - 1) / 2
                parts.append(
                    f'<path class="whisker" d="M{_num(cx)},{_num(y(b.low))}V{_num(y(b.high))}'
                    f"M{_num(cx - 3)},{_num(y(b.low))}h6M{_num(cx - 3)},{_num(y(b.high))}h6"
                    '"/>'
                )
        parts.append(_x_label(g, LEFT + gi * gw + gw / 2, H - BOTTOM + 6))
    parts.append(
        f'<line class="zero" x1="{LEFT}" x2="{W - RIGHT}" y1="{_num(y(0))}" y2="{_num(y(0))}"/>'
    )
    return _frame(title, "".join(parts), list(series), label, height)


def bar_range(bars: Iterable[Bar]) -> tuple[float, float]:
    """The value axis that shows every bar and whisker, and zero."""
    values = [v for b in bars for v in (b.value, b.low, b.high) if v is not None]
    values = [v for v in values if math.isfinite(v)]
    lo = min([0.0, *values])
    hi = max([1e-9, *values])
    return (lo, hi) if hi - lo >= 1e-9 else (lo, lo + 1.0)


def line_chart(
    title: str,
    lines: Mapping[str, Sequence[tuple[float, float]]],
    *,
    x_label: str = "",
    y_label: str = "",
    x_log: bool = False,
    x_names: Mapping[float, str] | None = None,
    diagonal: bool = False,
    y_range: tuple[float, float] = (0.0, 1.0),
    bands: Mapping[str, Sequence[tuple[float, float, float]]] | None = None,
) -> str:
    """Lines through (x, y) points, one colour and dash pattern per entry, so a line drawn
    over an identical one leaves it visible (the legend says which are the same);
    `bands` shades each line's interval, (x, low, high) points; `diagonal` draws y = x."""
    xs = [x for pts in lines.values() for x, _ in pts]
    tx = (lambda v: math.log10(v)) if x_log else (lambda v: v)
    x_lo, x_hi = (tx(min(xs)), tx(max(xs))) if xs else (0.0, 1.0)
    if x_hi - x_lo < 1e-9:
        x_hi = x_lo + 1.0
    y_lo, y_hi = y_range
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM

    def px(v: float) -> float:
        return LEFT + plot_w * (tx(v) - x_lo) / (x_hi - x_lo)

    def py(v: float) -> float:
        return TOP + plot_h * (1 - (v - y_lo) / (y_hi - y_lo))

    parts = [_y_axis(y_lo, y_hi, py)]
    if diagonal:
        parts.append(
            f'<line class="diag" x1="{_num(px(0))}" y1="{_num(py(0))}" '
            f'x2="{_num(px(1))}" y2="{_num(py(1))}"/>'
        )
    ticks = sorted(set(xs)) if x_names else _ticks(x_lo, x_hi)
    for t in ticks:
        name = (x_names or {}).get(t, f"{t:g}")
        parts.append(
            f'<text class="axis" x="{_num(px(t))}" y="{H - BOTTOM + 16}" text-anchor="middle">'
            f"{escape(name)}</text>"
        )
    for i, name in enumerate(lines):
        band = sorted((bands or {}).get(name, ()))
        if len(band) >= 2:
            upper = "L".join(f"{_num(px(x))},{_num(py(hi))}" for x, _, hi in band)
            lower = "L".join(f"{_num(px(x))},{_num(py(lo))}" for x, lo, _ in reversed(band))
            parts.append(
                f'<path class="band" d="M{upper}L{lower}Z" fill="{color(i)}">'
                f"<title>{escape(name)}: 95% interval</title></path>"
            )
    legend: list[str] = []
    seen: dict[tuple[tuple[float, float], ...], str] = {}
    for i, (name, pts) in enumerate(lines.items()):
        same = seen.setdefault(tuple(pts), name) if pts else name
        legend.append(name if same == name else f"{name} (same as {same})")
        if not pts:
            continue
        d = "M" + "L".join(f"{_num(px(x))},{_num(py(y))}" for x, y in pts)
        dash = DASHES[i % len(DASHES)]
        parts.append(
            f'<path class="line" d="{d}" stroke="{color(i)}"'
            + (f' stroke-dasharray="{dash}"' if dash else "")
            + f"><title>{escape(name)}</title></path>"
        )
        if len(pts) <= 24:
            parts.extend(
                f'<circle cx="{_num(px(x))}" cy="{_num(py(y))}" r="{3.5 - (i % 3)}" '
                f'fill="{color(i)}"><title>{escape(f"{name}: {y:.3f} at {x:g}")}</title></circle>'
                for x, y in pts
            )
    parts.append(
        f'<text class="axis" x="{W - RIGHT}" y="{H - BOTTOM + 34}" text-anchor="end">'
        f"{escape(x_label)}</text>"
    )
    return _frame(title, "".join(parts), legend, y_label)


def box_chart(title: str, samples: Mapping[str, Sequence[float]], *, label: str = "") -> str:
    """One box per entry: 5th, 25th, 50th, 75th and 95th percentiles of its samples."""
    values = [v for s in samples.values() for v in s if math.isfinite(v)]
    lo, hi = (min([0.0, *values]), max([1e-9, *values]))
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM

    def y(v: float) -> float:
        return TOP + plot_h * (1 - (v - lo) / (hi - lo))

    gw = plot_w / max(1, len(samples))
    parts = [_y_axis(lo, hi, y)]
    height = H - BOTTOM + _label_room(list(samples))
    for i, (name, got) in enumerate(samples.items()):
        s = sorted(v for v in got if math.isfinite(v))
        if not s:
            continue
        q = [s[min(len(s) - 1, int(p * (len(s) - 1) + 0.5))] for p in (0.05, 0.25, 0.5, 0.75, 0.95)]
        cx, bw = LEFT + i * gw + gw / 2, min(40.0, gw * 0.6)
        tip = f"{name}: median {q[2]:g}, p25 {q[1]:g}, p75 {q[3]:g}, p95 {q[4]:g} (n={len(s)})"
        parts.append(
            f'<g><title>{escape(tip)}</title><path class="whisker" d="M{_num(cx)},{_num(y(q[0]))}'
            f'V{_num(y(q[4]))}"/><rect x="{_num(cx - bw / 2)}" y="{_num(y(q[3]))}" '
            f'width="{_num(bw)}" height="{_num(max(0.5, y(q[1]) - y(q[3])))}" '
            f'fill="{color(i)}"/><line class="median" x1="{_num(cx - bw / 2)}" '
            f'x2="{_num(cx + bw / 2)}" y1="{_num(y(q[2]))}" y2="{_num(y(q[2]))}"/></g>'
            + _x_label(name, cx, H - BOTTOM + 6)
        )
    return _frame(title, "".join(parts), list(samples), label, height)
