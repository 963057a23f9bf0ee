"""The analyzer's published report as text (what `shuffledp analyzer` prints without --json).

The JSON (``shuffledp/report/1``, docs/report-schema.md) stays the contract: ``--json`` prints
it on stdout, ``--out FILE`` writes it, and the report topic holds it. This is for a person.
"""

from __future__ import annotations

from typing import Any

from shuffledp.analyzer.records import PublishedReport, Report

__all__ = ["format_published_report"]

_BAR = 30  # characters of the widest bar


def format_published_report(published: PublishedReport) -> str:
    """Header, one line per bin (noisy count, estimate, a bar), the guarantee, rejections,
    the error or warning if any."""
    report = published.report
    lines = [
        f"round {report.round}: {report.n_received} of {report.n_expected} reports received; "
        f"k = {report.k}, eps0 = {report.eps0:g}; estimate: {report.estimator}",
        *_bin_lines(report),
        "",
        guarantee_line(report),
        rejected_line(report),
        f"randomness: {report.randomness}",
    ]
    if published.error is not None:
        lines.append(f"error: {published.error}")
    if published.warning is not None:
        lines.append(f"warning: {published.warning}")
    return "\n".join(lines)


def guarantee_line(report: Report) -> str:
    privacy = report.privacy
    if privacy.error is not None:
        return f"guarantee: none ({privacy.error})"
    return (
        f"guarantee: eps = {_num(privacy.eps)}, delta <= {_num(privacy.delta)} (valid upper "
        f"bound from {privacy.bound}; delta_lower = {_num(privacy.delta_lower)}; computed for "
        f"n = {privacy.n} received)"
    )


def rejected_line(report: Report) -> str:
    rejected = {reason: count for reason, count in report.rejected.items() if count}
    listed = ", ".join(f"{reason} {count}" for reason, count in rejected.items())
    return f"rejected: {listed or 'none'}"


def _bin_lines(report: Report) -> list[str]:
    noisy = report.histogram
    estimate = report.estimate.counts
    if estimate is None:
        return [f"no estimate: {report.estimate.note or 'no report was received'}"]
    scale = max([*estimate, 1.0])
    lines = ["", f"{'bin':>4} {'noisy':>7} {'estimate':>10}  estimate (#)"]
    for j, count in enumerate(noisy):
        bar = "#" * round(_BAR * max(estimate[j], 0.0) / scale)
        lines.append(f"{j:>4} {count:>7} {estimate[j]:>10.1f}  {bar}")
    return lines


def format_number(value: Any) -> str:
    """A report's number for a person: 4 significant digits, ``n/a`` for None."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


_num = format_number
