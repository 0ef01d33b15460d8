#!/usr/bin/env python3
"""Turns a `tmux capture-pane -e -p` screen (text with SGR colour codes) into an SVG,
so the README shows the real application's screens with their colours. Standard
library only. Usage: ansi2svg.py COLS ROWS BACKGROUND < screen.ans > screen.svg"""
import html
import re
import sys

BASE = ["#000000", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5",
        "#666666", "#f14c4c", "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#ffffff"]


def xterm(n):
    if n < 16:
        return BASE[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return "#%02x%02x%02x" % (steps[n // 36], steps[(n // 6) % 6], steps[n % 6])
    v = 8 + (n - 232) * 10
    return "#%02x%02x%02x" % (v, v, v)


def parse(text, cols, rows):
    """Returns rows of cells: (char, fg, bg, bold)."""
    screen = []
    for line in text.split("\n")[:rows]:
        fg, bg, bold, rev = None, None, False, False
        cells = []
        for m in re.finditer(r"\x1b\[([0-9;]*)m|([^\x1b])", line):
            if m.group(2) is not None:
                f, b = (bg, fg) if rev else (fg, bg)
                cells.append((m.group(2), f, b, bold))
                continue
            codes = [int(c) if c else 0 for c in m.group(1).split(";")]
            i = 0
            while i < len(codes):
                c = codes[i]
                if c == 0:
                    fg, bg, bold, rev = None, None, False, False
                elif c == 1:
                    bold = True
                elif c == 22:
                    bold = False
                elif c == 7:
                    rev = True
                elif c == 27:
                    rev = False
                elif 30 <= c <= 37:
                    fg = BASE[c - 30]
                elif 90 <= c <= 97:
                    fg = BASE[c - 90 + 8]
                elif 40 <= c <= 47:
                    bg = BASE[c - 40]
                elif 100 <= c <= 107:
                    bg = BASE[c - 100 + 8]
                elif c == 39:
                    fg = None
                elif c == 49:
                    bg = None
                elif c in (38, 48) and i + 1 < len(codes):
                    if codes[i + 1] == 5 and i + 2 < len(codes):
                        col = xterm(codes[i + 2])
                        i += 2
                    elif codes[i + 1] == 2 and i + 4 < len(codes):
                        col = "#%02x%02x%02x" % tuple(codes[i + 2:i + 5])
                        i += 4
                    else:
                        col = None
                    if c == 38:
                        fg = col
                    else:
                        bg = col
                i += 1
        cells += [(" ", None, None, False)] * (cols - len(cells))
        screen.append(cells[:cols])
    while len(screen) < rows:
        screen.append([(" ", None, None, False)] * cols)
    return screen


def main():
    cols, rows, background = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    foreground = "#1e1e1e" if background.lower() in ("#ffffff", "#fff", "white") else "#d4d4d4"
    screen = parse(sys.stdin.read(), cols, rows)
    cw, ch = 8.4, 18
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="14">'
           % (cols * cw + 16, rows * ch + 16),
           '<rect width="100%%" height="100%%" rx="6" fill="%s"/>' % background,
           '<g transform="translate(8,8)" xml:space="preserve">']
    for y, cells in enumerate(screen):
        x = 0
        while x < cols:
            c, fg, bg, bold = cells[x]
            run = x
            while run < cols and cells[run][1:] == (fg, bg, bold):
                run += 1
            if bg:
                out.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>' % (x * cw, y * ch, (run - x) * cw, ch, bg))
            text = "".join(cell[0] for cell in cells[x:run])
            if text.strip():
                weight = ' font-weight="bold"' if bold else ""
                out.append('<text x="%.1f" y="%d" fill="%s"%s textLength="%.1f" lengthAdjust="spacingAndGlyphs">%s</text>'
                           % (x * cw, y * ch + 14, fg or foreground, weight, (run - x) * cw, html.escape(text)))
            x = run
    out.append("</g></svg>")
    print("\n".join(out))


if __name__ == "__main__":
    main()
