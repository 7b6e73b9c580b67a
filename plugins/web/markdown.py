"""Pages as the model reads them: HTML turned into Markdown, other text as it is."""

from __future__ import annotations

import re

TEXT_TYPES = frozenset(
    {
        "text/plain",
        "text/markdown",
        "text/x-markdown",
        "text/csv",
        "text/xml",
        "application/json",
        "application/xml",
        "application/rss+xml",
        "application/atom+xml",
        "application/ld+json",
    }
)
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})

# Parts of a page that are not its text: scripts and styles would read as noise, forms
# and navigation as clutter.
_DROPPED = (
    "head",
    "title",
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "canvas",
    "iframe",
    "form",
)


def readable(content_type: str) -> bool:
    kind = media_type(content_type)
    return kind in TEXT_TYPES or kind in HTML_TYPES or kind.endswith("+json")


def media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def html_to_markdown(html: str) -> tuple[str, str]:
    """The page's title and its main content as Markdown."""
    # Imported here: bs4 and markdownify cost ~60 ms, paid only by a fetch.
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(_DROPPED):
        tag.decompose()
    main = soup.find("main") or soup.find("article") or soup.body or soup
    text = MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(main)
    return title, re.sub(r"\n{3,}", "\n\n", text).strip()
