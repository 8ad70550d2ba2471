"""Print the API coverage summary at the end of every test run."""
from __future__ import annotations


def pytest_terminal_summary(terminalreporter):
    try:
        from spec_tests.test_api_coverage import coverage_report
        report = coverage_report()
    except Exception as exc:  # noqa: BLE001 - the summary must never fail the run
        terminalreporter.write_line(f"API coverage: unavailable ({exc})")
        return
    terminalreporter.section("API coverage (implemented / documented)")
    total_done = total = 0
    for namespace, (done, documented) in sorted(report.items(), key=lambda kv: -kv[1][1]):
        total_done += done
        total += documented
        if documented >= 5:
            terminalreporter.write_line(f"{namespace:40s} {done:4d} / {documented:4d}")
    terminalreporter.write_line(f"{'all namespaces':40s} {total_done:4d} / {total:4d}")
