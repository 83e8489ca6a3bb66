"""`dialogbench report RUN_DIR... [--out FILE.html]` (the HTML report) and `dialogbench view
RUN_DIR...` (the same reports served on localhost)."""

from __future__ import annotations

import threading
import webbrowser
from collections.abc import Sequence
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from dialogbench.cli.ui import console, err, friendly_errors
from dialogbench.report.html import read_runs, render, write_report

RunsArg = Annotated[list[Path], typer.Argument(help="finished run folders (the --out of runs)")]
HTML_COMMAND = "html"


class ReportGroup(TyperGroup):
    """`report`'s group: `report RUN_DIR...` is `report html RUN_DIR...`, while named
    subcommands (`report demo ...`) go to their own command."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        first = next((a for a in args if not a.startswith("-")), None)
        named = first is not None and first in self.commands
        if args and args[0] != "--help" and not named:
            args = [HTML_COMMAND, *args]
        return super().parse_args(ctx, args)


def report_html(
    runs: RunsArg,
    out: Annotated[
        Path | None, typer.Option(help="the page to write (default: RUN_DIR/report.html)")
    ] = None,
    texts: Annotated[
        bool, typer.Option(help="show message texts from the dataset when it is here")
    ] = True,
) -> None:
    """One self-contained HTML page of finished runs: figures with intervals, plots, the
    manifest and warnings, and a drill-down per item. Also `dialogbench report RUN_DIR...`."""
    with friendly_errors():
        target = out or (runs[0] / "report.html")
        written = write_report(runs, target, texts=texts)
        console.print(f"wrote {written} ({written.stat().st_size / 1e3:.0f} kB)")


def view(
    runs: RunsArg,
    port: Annotated[int, typer.Option(help="port on 127.0.0.1 (0: any free one)")] = 0,
    browser: Annotated[bool, typer.Option(help="open a browser when there is one")] = True,
) -> None:
    """Serve the report of finished runs on localhost (redrawn on every load, so a rerun
    shows at once) and open it in a browser; Ctrl-C stops."""
    with friendly_errors():
        read_runs(runs)  # a bad folder is an error before anything is served
        server = serve(runs, port)
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        console.print(f"serving the report of {len(runs)} run(s) at {url} (Ctrl-C stops)")
        if browser and not _open(url):
            err.print("no browser here: open the address above in one")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()


def _open(url: str) -> bool:
    try:
        webbrowser.get()
    except webbrowser.Error:
        return False
    threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
    return True


def serve(runs: Sequence[Path], port: int = 0) -> ThreadingHTTPServer:
    """An HTTP server on 127.0.0.1 whose `/` is the report of `runs` (call serve_forever)."""
    folders = list(runs)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] not in ("/", "/index.html"):
                self.send_error(404, "the report is at /")
                return
            try:
                body = render(read_runs(folders)).encode("utf-8")
                code = 200
            except Exception as e:  # a run folder changed under us: say so in the page
                body = f"<!doctype html><p>cannot read the runs: {escape(str(e))}</p>".encode()
                code = 500
            self.send_response(code)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return ThreadingHTTPServer(("127.0.0.1", port), Handler)


def register(app: typer.Typer, report_app: typer.Typer) -> None:
    """Add `report html` (also reached as `report RUN_DIR...`) and `view` to the CLI."""
    report_app.info.cls = ReportGroup
    report_app.command(HTML_COMMAND)(report_html)
    app.command("view")(view)
