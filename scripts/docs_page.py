"""Render one page of the docs to HTML, its code blocks coloured by Pygments (```` ```lash ````
by lashflow's Lashlang lexer), and optionally photograph it with headless Chromium.

Run: python scripts/docs_page.py docs/editors.md [--html out.html] [--png out.png]

docs/images/editors.png is docs/editors.md with
``--png docs/images/editors.png --section "lashflow fmt"``.
"""

from __future__ import annotations

import argparse
import html
import shutil
import sys
import tempfile
from pathlib import Path

from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 920px; margin: 24px auto;
       color: #1f2328; padding: 0 16px; }
code { font: 13px/1.45 ui-monospace, "DejaVu Sans Mono", monospace; }
pre { background: #f6f8fa; padding: 12px 16px; border-radius: 6px; overflow-x: auto; }
table { border-collapse: collapse; font-size: 13px; } td, th { border: 1px solid #d0d7de;
        padding: 4px 8px; vertical-align: top; }
img { display: none; }
"""


def _fence(md: MarkdownIt) -> None:
    def render(renderer, tokens, idx, options, env):  # type: ignore[no-untyped-def]
        token = tokens[idx]
        language = token.info.strip().split(" ")[0]
        try:
            lexer = get_lexer_by_name(language) if language else None
        except ClassNotFound:
            lexer = None
        if lexer is None:
            return f"<pre><code>{html.escape(token.content)}</code></pre>\n"
        return highlight(token.content, lexer, HtmlFormatter(nowrap=False))

    md.add_render_rule("fence", render)


def page(markdown: str, title: str) -> str:
    md = MarkdownIt("commonmark").enable("table")
    _fence(md)
    css = HtmlFormatter(style="default").get_style_defs(".highlight")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>{STYLE}{css}</style></head><body>{md.render(markdown)}</body></html>")


def photograph(html_file: Path, png: Path, heading: str | None) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), headless=True,
                                    args=["--no-sandbox"])
        view = browser.new_page(viewport={"width": 980, "height": 900}, device_scale_factor=1)
        view.goto(html_file.as_uri())
        if heading:  # start the picture at that section
            view.evaluate("""text => [...document.querySelectorAll('h2')]
                .find(h => h.textContent.includes(text)).scrollIntoView()""", heading)
        view.screenshot(path=str(png), full_page=False)
        browser.close()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("markdown", type=Path)
    ap.add_argument("--html", type=Path)
    ap.add_argument("--png", type=Path)
    ap.add_argument("--section", help="start the picture at the heading holding this text")
    args = ap.parse_args(argv)
    text = page(args.markdown.read_text(encoding="utf-8"), args.markdown.stem)
    target = args.html or Path(tempfile.mkdtemp()) / f"{args.markdown.stem}.html"
    target.write_text(text, encoding="utf-8")
    if args.png:
        args.png.parent.mkdir(parents=True, exist_ok=True)
        photograph(target, args.png, args.section)
    print(args.png or target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
