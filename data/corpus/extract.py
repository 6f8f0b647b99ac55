#!/usr/bin/python3
"""Extraction stage of the corpus build: unpacked packages -> per-source part files.

  /usr/bin/python3 extract.py --root ROOT [--jobs N] [--quick] [--skip-packages a,b]

For every source of sources.py this writes ROOT/parts/<source>/<group>.<lang>.txt in the
final record format (each document followed by "\\n\\x1e\\n") and then
ROOT/parts/<source>/DONE (JSON: key, counts). A source whose DONE key matches is
skipped (cached). The work is file-level and runs on a process pool (--jobs).
Standard library only; external tools: groff, pdftotext, pod2text.
Exit status 1 if a core source failed (an optional one only warns).
"""
import argparse
import gzip
import hashlib
import html.parser
import json
import lzma
import multiprocessing as mp
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import traceback
import unicodedata
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sources as S  # noqa: E402

VERSION = 4          # bump to re-extract every source
RS = "\x1e"
SEP = "\n" + RS + "\n"
CHUNK = 20000        # size of split documents (dictionaries, UI strings)

# ------------------------------------------------------------------ text utils
_CTRL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]|\x1b[=>]")
_BLANKS = re.compile(r"\n{3,}")


def clean(text, code=False):
    """Normalize one document; returns '' if nothing is left."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if code:
        text = text.replace("\x00", "").replace(RS, "")
    else:
        text = _ANSI.sub("", text)
        text = _CTRL.sub("", text)
        text = "\n".join(l.rstrip() for l in text.split("\n"))
        text = _BLANKS.sub("\n\n", text)
    text = unicodedata.normalize("NFC", text)
    text = text.strip("\n")
    if not text.strip():
        return ""
    return text


def split_lines(text, size=CHUNK):
    """Split text into ~size-byte pieces at line boundaries."""
    out, cur, n = [], [], 0
    for line in text.split("\n"):
        b = len(line.encode("utf-8", "replace")) + 1
        if n + b > size and cur:
            out.append("\n".join(cur))
            cur, n = [], 0
        cur.append(line)
        n += b
    if cur:
        out.append("\n".join(cur))
    return out


def read_bytes(path):
    if path.endswith(".gz") or path.endswith(".dz"):
        with gzip.open(path, "rb") as f:
            return f.read()
    if path.endswith(".xz"):
        with lzma.open(path, "rb") as f:
            return f.read()
    if path.endswith(".lz4"):
        return subprocess.run(["lz4cat", path], stdout=subprocess.PIPE, check=True).stdout
    with open(path, "rb") as f:
        return f.read()


def decode(data, fallbacks=("cp1252",)):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    for enc in fallbacks:
        try:
            return data.decode(enc)
        except (UnicodeDecodeError, LookupError):
            continue
    return data.decode("utf-8", "replace")


# ------------------------------------------------------------- language tools
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]")
_KANA = re.compile(r"[\u3040-\u30ff]")
_CYR = re.compile(r"[\u0400-\u04ff]")
_LAT = re.compile(r"[A-Za-z]")
_WORD = re.compile(r"[A-Za-zÄÖÜäöüß]+")
EN_STOP = set("the and of to is that for with this are be by it as or an on not from "
              "which can if you when will was have has all its into these those then "
              "than such there their only may should must".split())
DE_STOP = set("der die das und ist nicht mit für von zu ein eine einer den dem des auf im "
              "wird werden sie es bei auch als oder nur wenn kann sind aus dass über wie "
              "diese dieser noch nach vom zum zur man".split())


def stop_hits(words):
    en = sum(1 for w in words if w in EN_STOP)
    de = sum(1 for w in words if w in DE_STOP)
    return en, de


def english_line(line, lang):
    """True if a line of a translated page looks like untranslated English prose."""
    words = [w.lower() for w in _WORD.findall(line)]
    if len(words) < 4:
        return False
    en, de = stop_hits(words)
    if lang == "de":
        return en >= 2 and en > 2 * de
    if lang == "ru":
        return not _CYR.search(line) and en >= 1
    if lang in ("ja", "zh"):
        return not _CJK.search(line) and not _KANA.search(line) and en >= 2
    return False


def looks_like(text, lang):
    """Is a whole document (PDF/TeX) predominantly in lang?"""
    sample = text[:200000]
    if lang in ("zh", "ja"):
        cjk = len(_CJK.findall(sample)) + len(_KANA.findall(sample))
        lat = len(_LAT.findall(sample))
        if cjk < 200 or cjk < 0.25 * lat:
            return False
        kana = len(_KANA.findall(sample))
        if lang == "zh":
            return kana < 0.05 * cjk
        return kana >= 0.05 * cjk
    if lang == "ru":
        cyr = len(_CYR.findall(sample))
        return cyr >= 200 and cyr >= 0.5 * len(_LAT.findall(sample))
    if lang == "de":
        en, de = stop_hits([w.lower() for w in _WORD.findall(sample)])
        return de >= 50 and de > 1.5 * en
    return True


LANG_MAP = {"en": "en", "c": "en", "en-us": "en", "en-gb": "en", "de": "de", "de-de": "de",
            "de-at": "de", "de-ch": "de", "ja": "ja", "ja-jp": "ja", "ru": "ru", "ru-ru": "ru",
            "zh": "zh", "zh-cn": "zh", "zh-tw": "zh", "zh-hk": "zh", "zh-sg": "zh",
            "zh-hans": "zh", "zh-hant": "zh"}
OTHER_LANGS = set("""af am an ar as ast az be bg bn bo br bs ca ckb cs cy da dz el eo es et eu fa
fi fo fr fur fy ga gd gl gu ha he hi hr hu hy ia id ig is it ka kk km kn ko ku ky lb lg lo lt
lv mai mg mi mk ml mn mr ms mt my nb nds ne nl nn no nso oc or pa pl ps pt qu ro rw sa sc si
sk sl so sq sr sv sw ta te tg th ti tk tl tr tt ug uk ur uz vi wa wo xh yi yo zu""".split())


def lang_token(tok):
    """'zh_CN' -> 'zh'; 'fr-FR' -> 'other'; 'html' -> None."""
    t = tok.lower().replace("_", "-")
    if t in LANG_MAP:
        return LANG_MAP[t]
    base = re.split(r"[-@.]", t)[0]
    if re.fullmatch(r"[a-z]{2,3}(-[a-z0-9]{2,8})?(@[a-z]+)?", t) and base in OTHER_LANGS:
        return "other"
    if re.fullmatch(r"[a-z]{2}-[a-z]{2}", t) and base in LANG_MAP:
        return LANG_MAP[base]
    return None


def pkg_lang(pkg, default="en"):
    """debian-edu-doc-de -> de, maint-guide-zh-cn -> zh, installation-guide-amd64 -> default."""
    parts = pkg.split("-")
    for k in (2, 1):
        if len(parts) > k:
            l = LANG_MAP.get("-".join(parts[-k:]))
            if l:
                return l
    return default


def path_lang(rel, default):
    """Language of a documentation file from its name (x.de.html) or folders (de/, zh_CN/)."""
    parts = rel.split("/")
    name = parts[-1].split(".")
    for tok in reversed(name[1:-1]):          # index.zh-cn.html, basic-defs.de.html
        l = lang_token(tok)
        if l:
            return l
    for comp in reversed(parts[:-1]):
        l = lang_token(comp)
        if l:
            return l
    return default


# ----------------------------------------------------------------- HTML -> text
_BLOCK2 = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "table", "ul", "ol",
           "dl", "section", "article", "figure", "hr", "center", "address", "details"}
_BLOCK1 = {"br", "div", "li", "tr", "dt", "dd", "caption", "figcaption", "summary", "main",
           "body", "tbody", "thead", "tfoot", "form", "fieldset", "legend", "option"}
_SKIP = {"script", "style", "head", "nav", "noscript", "header", "footer", "aside", "svg",
         "button", "select", "template", "iframe", "object", "textarea", "map"}
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
         "source", "track", "wbr", "keygen"}
_SKIP_CLASS = re.compile(r"(^|\s)(navheader|navfooter|navigation|nav|navbar|breadcrumbs?|"
                         r"sphinxsidebar|sphinxsidebarwrapper|related|footer|header|headerlink|"
                         r"t-navbar|editsection|printfooter|catlinks|toc-backlink|skip-link|"
                         r"copyright|footnav|nav_table|nav-panel|contents-treeview|index-label|docnav)(\s|$)")
_SKIP_ID = re.compile(r"^(footer|header|navigation|nav|mw-head|mw-panel|siteSub|contentSub|"
                      r"jump-to-nav|catlinks|sidebar|Contents|Index|Bookmarks|TopLeftHeader|"
                      r"DonationFrame|BottomNavigation|navbar)$")


class _H2T(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out = []
        self.skip = 0          # depth inside a skipped element
        self.stack = []        # open tags while skipping (to find the matching end)
        self.pre = 0

    def handle_starttag(self, tag, attrs):
        if tag in _VOID:
            if not self.skip:
                if tag == "br":
                    self.out.append("\n")
                elif tag == "hr":
                    self.out.append("\n\n")
                elif tag == "img":
                    pass
            return
        if self.skip:
            self.stack.append(tag)
            return
        a = dict(attrs)
        if (tag in _SKIP or (a.get("class") and _SKIP_CLASS.search(a["class"]))
                or (a.get("id") and _SKIP_ID.match(a["id"]))
                or a.get("role") in ("navigation", "banner", "contentinfo")
                or "hidden" in a):
            self.skip = 1
            self.stack = [tag]
            return
        if tag == "pre":
            self.pre += 1
        if tag in _BLOCK2:
            self.out.append("\n\n")
        elif tag in _BLOCK1:
            self.out.append("\n")
        elif tag in ("td", "th"):
            self.out.append(" ")

    def handle_endtag(self, tag):
        if self.skip:
            # close up to the matching open tag (tolerates unclosed children)
            for i in range(len(self.stack) - 1, -1, -1):
                if self.stack[i] == tag:
                    del self.stack[i:]
                    break
            if not self.stack:
                self.skip = 0
            return
        if tag == "pre" and self.pre:
            self.pre -= 1
        if tag in _BLOCK2:
            self.out.append("\n\n")
        elif tag in _BLOCK1:
            self.out.append("\n")
        elif tag in ("td", "th"):
            self.out.append(" ")

    def handle_data(self, data):
        if self.skip:
            return
        if self.pre:
            self.out.append(data.replace("\t", "    "))
        else:
            self.out.append(re.sub(r"\s+", " ", data))


def html_to_text(src):
    p = _H2T()
    try:
        p.feed(src)
        p.close()
    except Exception:
        pass
    text = "".join(p.out).replace("\xa0", " ")
    lines = []
    for l in text.split("\n"):
        l = l.rstrip()
        if l.startswith(" ") and not l.startswith("  "):
            l = l[1:]
        lines.append(l)
    return _BLANKS.sub("\n\n", "\n".join(lines)).strip()


_CHARSET = re.compile(rb"""charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.I)


def decode_html(data):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        m = _CHARSET.search(data[:4096])
        enc = m.group(1).decode("ascii") if m else "cp1252"
        try:
            return data.decode(enc, "replace")
        except LookupError:
            return data.decode("cp1252", "replace")


# --------------------------------------------------------------- Mallard -> text
_M_BLOCK = {"page", "section", "title", "subtitle", "p", "item", "list", "steps", "terms",
            "tree", "note", "screen", "code", "synopsis", "table", "tr", "td", "th", "figure",
            "example", "listing", "desc", "quote", "cite", "comment", "links", "thead", "tbody"}
_M_SKIP = {"info", "comment", "media", "rules", "credit", "license", "revision", "link"}


def mallard_to_text(data):
    try:
        root = ET.fromstring(data)
    except ET.ParseError:
        return ""
    out = []

    def walk(el, pre):
        tag = el.tag.rsplit("}", 1)[-1] if isinstance(el.tag, str) else ""
        if tag in _M_SKIP:
            if el.tail:
                out.append(el.tail if pre else re.sub(r"\s+", " ", el.tail))
            return
        blk = tag in _M_BLOCK
        ipre = pre or tag in ("screen", "code", "synopsis") and blk
        if blk:
            out.append("\n")
        if el.text:
            out.append(el.text if ipre else re.sub(r"\s+", " ", el.text))
        for ch in el:
            walk(ch, ipre)
        if blk:
            out.append("\n")
        if el.tail:
            out.append(el.tail if pre else re.sub(r"\s+", " ", el.tail))

    walk(root, False)
    lines = [l.strip() for l in "".join(out).split("\n")]
    return re.sub(r"\n{2,}", "\n", "\n".join(lines)).strip()


# ------------------------------------------------------------------ handlers
# Each handler: (path, rel, lang, src) -> list of (group|None, lang, text)


def h_html(path, rel, lang, src):
    return [(None, lang, html_to_text(decode_html(read_bytes(path))))]


def h_raw(path, rel, lang, src):
    return [(None, lang, decode(read_bytes(path)))]


def h_mallard(path, rel, lang, src):
    return [(None, lang, mallard_to_text(read_bytes(path)))]


def h_pdf(path, rel, lang, src):
    try:
        r = subprocess.run(["pdftotext", "-q", "-enc", "UTF-8", path, "-"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=180)
    except subprocess.TimeoutExpired:
        return []
    text = r.stdout.decode("utf-8", "replace").replace("\f", "\n")
    # drop page-number-only lines
    lines = [l for l in text.split("\n") if not re.fullmatch(r"\s*[-–]?\s*\d{1,4}\s*[-–]?\s*", l)]
    # layout debris (one glyph per line: rubies, rotated text, exam forms) means no prose
    nz = [l.strip() for l in lines if l.strip()]
    if not nz or sum(1 for l in nz if len(l) <= 3) > 0.3 * len(nz):
        return []
    return [(None, lang, "\n".join(lines))]


def h_pod(path, rel, lang, src):
    r = subprocess.run(["pod2text", "-w", "100", path], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, timeout=120)
    return [(None, lang, r.stdout.decode("utf-8", "replace"))]


def h_mo(path, rel, lang, src):
    data = read_bytes(path)
    if len(data) < 28:
        return []
    magic = struct.unpack("<I", data[:4])[0]
    end = "<" if magic == 0x950412de else ">"
    _, n, orig, trans = struct.unpack(end + "4I", data[4:20])
    strs = []
    for i in range(n):
        ln, off = struct.unpack(end + "2I", data[trans + 8 * i: trans + 8 * i + 8])
        olen, _ = struct.unpack(end + "2I", data[orig + 8 * i: orig + 8 * i + 8])
        if olen == 0:
            continue                              # header entry
        for s in data[off: off + ln].split(b"\x00"):
            s = s.decode("utf-8", "replace").strip()
            if s and not s.isdigit():
                strs.append(s)
    return [(None, lang, piece) for piece in split_lines("\n".join(strs))]


def h_dict(path, rel, lang, src):
    enc = src.get("encoding")
    data = read_bytes(path)
    text = data.decode(enc, "replace") if enc else decode(data)
    return [(None, lang, piece) for piece in split_lines(text)]


def h_code(path, rel, lang, src):
    if os.path.getsize(path) > src.get("max_bytes", 400000):
        return []
    data = read_bytes(path)
    if b"\x00" in data:
        return []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return []
    return [("code", "code", text)]


def h_tex(path, rel, lang, src):
    docs = h_pdf(path, rel, lang, src) if path.endswith(".pdf") else h_raw(path, rel, lang, src)
    return [d for d in docs if looks_like(d[2], lang)]


# force left adjustment and no hyphenation even where a page asks for .ad b / .hy
_MAN_PRE = ".rn ad ad@orig\n.de ad\n.ad@orig l\n..\n.rn hy hy@orig\n.de hy\n..\n.nh\n.ad l\n"
_MAN_HDR = re.compile(r"\(\s*[0-9n][A-Za-z0-9+]*\s*\)")


def h_man(path, rel, lang, src):
    data = read_bytes(path)
    head = data[:400].lstrip()
    if head.startswith(b".so ") and len(data) < 400:
        return []                                  # link to another page
    fb = {"ja": ("euc-jp", "shift_jis"), "zh": ("gb18030", "big5"), "ru": ("koi8-r",),
          "de": ("latin-1",)}.get(lang, ("latin-1",))
    text = decode(data, fb)
    env = dict(os.environ, LC_ALL="C.UTF-8", GROFF_NO_SGR="1")
    try:
        r = subprocess.run(["groff", "-Kutf-8", "-Tutf8", "-mandoc", "-P-cbou", "-rLL=100n", "-t"],
                           input=(_MAN_PRE + text).encode("utf-8"), stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, env=env, timeout=60,
                           cwd=os.path.dirname(os.path.dirname(path)))
    except subprocess.TimeoutExpired:
        return []
    out = r.stdout.decode("utf-8", "replace")
    lines = out.split("\n")
    nz = [i for i, l in enumerate(lines) if l.strip()]
    # drop the running header (NAME(1) ... NAME(1)) and footer (source, date, NAME(1))
    if nz and _MAN_HDR.search(lines[nz[0]]):
        lines[nz[0]] = ""
    if len(nz) > 1 and _MAN_HDR.search(lines[nz[-1]]):
        lines[nz[-1]] = ""
    res = []
    for l in lines:
        l = l.rstrip()
        n = len(l) - len(l.lstrip(" "))
        if n >= 7:
            l = l[7:]
        res.append(l)
    return [(None, lang, "\n".join(res))]


def h_fortune(path, rel, lang, src):
    text = decode(read_bytes(path), ("koi8-r",) if lang == "ru" else ("latin-1",))
    docs = re.split(r"\n%[ \t]*\n", "\n" + text + "\n")
    return [(None, lang, d) for d in docs]


def h_descriptions(path, rel, lang, src):
    text = decode(read_bytes(path))
    out = []
    field = None
    for block in text.split("\n\n"):
        short, body = None, []
        for line in block.split("\n"):
            if line.startswith("Description-") and not line.startswith("Description-md5"):
                short = line.split(":", 1)[1].strip()
                field = True
            elif line.startswith(" ") and field:
                l = line[1:]
                body.append("" if l.strip() == "." else l)
            elif line and not line.startswith(" "):
                field = None
        if short:
            out.append((None, lang, short + "\n" + "\n".join(body)))
    return out


_POEM_HEAD = ("title", "rhythmic", "chapter", "section", "author")


def _poems(obj, out):
    if isinstance(obj, list):
        for x in obj:
            _poems(x, out)
        return
    if not isinstance(obj, dict):
        return
    body = None
    for k in ("paragraphs", "content", "para"):
        v = obj.get(k)
        if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
            body = v
            break
        if isinstance(v, str) and v.strip():
            body = [v]
            break
    if body is not None:
        head = [str(obj[k]).strip() for k in _POEM_HEAD if isinstance(obj.get(k), str) and obj[k].strip()]
        notes = obj.get("notes")
        notes = [n for n in notes if isinstance(n, str)] if isinstance(notes, list) else []
        out.append("\n".join(head + body + notes))
    elif ("desc" in obj or "description" in obj) and "name" in obj:
        d = obj.get("desc") or obj.get("description") or ""
        if isinstance(d, str) and d.strip():
            out.append(str(obj["name"]) + "\n" + d)
    else:
        if isinstance(obj.get("abstract"), list):
            ab = [x for x in obj["abstract"] if isinstance(x, str)]
            if ab:
                out.append("\n".join([str(obj.get("title", ""))] + ab))
        for v in obj.values():
            if isinstance(v, (list, dict)):
                _poems(v, out)


def h_poetry(path, rel, lang, src):
    with open(path, "rb") as f:
        obj = json.loads(f.read().decode("utf-8"))
    out = []
    _poems(obj, out)
    return [(None, lang, d) for d in out]


HANDLERS = {"html": h_html, "raw": h_raw, "mallard": h_mallard, "pdf": h_pdf, "pod": h_pod,
            "mo": h_mo, "dict": h_dict, "code": h_code, "tex": h_tex, "man": h_man,
            "fortune": h_fortune, "descriptions": h_descriptions, "poetry": h_poetry}

# ------------------------------------------------------------ source planning
# How each kind of source is read: list of (handler, include-regex on the relative path).
KIND_RULES = {
    "man": [("man", r"^usr/share/man/[^/]+/man[^/]+/[^/]+$|^usr/share/man/man[^/]+/[^/]+$")],
    "html": [("html", r"\.html?(\.gz)?$")],
    "mallard": [("mallard", r"^usr/share/help/[^/]+/.+\.page$")],
    "mo": [("mo", r"\.mo$")],
    "dictd": [("dict", r"^usr/share/dictd/.+\.dict(\.dz)?$")],
    "plaindict": [("dict", r"^usr/share/(trans/de-en|edict/edict)$")],
    "fortune": [("fortune", r"^usr/share/games/fortunes/(?!.*\.dat$).+$")],
    "tex": [("tex", r"^usr/share/doc/texlive-doc/.+\.(pdf|tex)$")],
    "code": [("code", r"\.(go|rs|pm|pl|py|c|h)$")],
    "rst": [("raw", r"/_sources/.+\.(rst\.txt|txt)$")],
    "pod": [("pod", r"\.pod$")],
    "math": [("html", r"\.html?$"), ("raw", r"\.tex$")],
    "poetry": [("poetry", r"\.json$")],
}

# Per-source path exclusions (relative to the package root).
EXCLUDE = {
    "lilypond-doc": r"-big-page|/Documentation/[0-9a-f]{2}/",
    "debian-edu-doc": r"bullseye",
    "debian-policy": r"/fhs/|\.txt",
    "gnome-devel-docs": r"",
    "docs-cppreference": r"/(common|fonts)/",
    "math-sympy": r"/(_modules|_static|_images|_sources)/|/(genindex|search|py-modindex)\.html$",
    "math-gap": r"_mj\.html$|chooser\.html$",
    "math-pari": r"(macs|macro|paricfg)\.tex$",
    "poetry": r"/dist/(rank|strains)/|/error/|表面结构字",
    "tex-ru": r"ukr|bulgar|mongol|lshort-bg|lshort-mn|/montex/",
    "code-rust": r"",
}
BOILERPLATE_KINDS = {"html", "mallard", "math"}
LANGFILTER_KINDS = {"man", "html", "mallard"}   # drop untranslated English lines in de/ru/ja/zh
LINUX_CODE_DIRS = ("kernel/", "mm/", "fs/ext4/", "fs/nfs/", "fs/proc/", "fs/fuse/", "net/core/",
                   "net/ipv4/", "lib/", "block/", "ipc/", "init/", "include/linux/",
                   "arch/x86/kernel/", "arch/x86/mm/", "drivers/base/", "drivers/usb/core/",
                   "security/selinux/")


def plan_source(src, root, skip):
    """-> (tasks, packages used). A task: (source name, handler, abs path, rel, lang, opts)."""
    name, kind = src["name"], src["kind"]
    opts = {k: v for k, v in src.items() if k in ("encoding", "max_bytes")}
    if kind in LANGFILTER_KINDS:
        opts["langfilter"] = True
    if name == "edict":
        opts["encoding"] = "euc-jp"
    unp = os.path.join(root, "unpacked")
    tasks, used = [], []
    if kind == "descriptions":
        lists = os.path.join(root, "apt", "lists")
        if os.path.isdir(lists):
            for fn in sorted(os.listdir(lists)):
                m = re.search(r"_i18n_Translation-([A-Za-z%0-9_]+?)(\.(lz4|gz|xz))?$", fn)
                if m:
                    code = m.group(1).replace("%5f", "_").replace("%5F", "_")
                    l = lang_token(code)
                    if l and l != "other":
                        tasks.append((name, "descriptions", os.path.join(lists, fn), fn, l, opts))
        return tasks, ["apt:Translation-" + x for x in ("en", "de", "ja", "ru", "zh_CN", "zh_TW")]
    if kind == "poetry":
        base = os.path.join(unp, "npm-chinese-poetry")
        if os.path.isdir(base):
            used.append("npm:chinese-poetry@%s" % S.NPM_PACKAGES["chinese-poetry"])
            excl = re.compile(EXCLUDE["poetry"])
            for rel in walk(base):
                if rel.endswith(".json") and "/dist/" in "/" + rel and not excl.search("/" + rel):
                    tasks.append((name, "poetry", os.path.join(base, rel), rel, "zh", opts))
        return tasks, used
    if kind == "linux":
        base = os.path.join(unp, "linux-tree")
        if not os.path.isdir(base):
            return [], []
        used.append("linux-source-6.1")
        for rel in walk(base):
            r = rel.split("/", 1)[1] if "/" in rel else rel
            p = os.path.join(base, rel)
            if r.startswith("Documentation/"):
                if not r.endswith((".rst", ".txt")):
                    continue
                l = "en"
                m = re.match(r"Documentation/translations/([^/]+)/", r)
                if m:
                    l = lang_token(m.group(1)) or "other"
                if l != "other":
                    tasks.append((name, "raw", p, r, l, dict(opts, group="docs")))
            elif r.endswith((".c", ".h")) and (r.startswith(LINUX_CODE_DIRS)
                                               or re.fullmatch(r"fs/[^/]+\.[ch]", r)):
                tasks.append((name, "code", p, r, "code", opts))
        return tasks, used
    rules = [(h, re.compile(rx)) for h, rx in KIND_RULES[kind]]
    excl = EXCLUDE.get(name) or None
    excl = re.compile(excl) if excl else None
    for pkg in src["packages"]:
        base = os.path.join(unp, pkg)
        if pkg in skip or not os.path.exists(os.path.join(root, "markers", "unpack." + pkg)):
            continue
        used.append(pkg)
        for rel in walk(base):
            if excl and excl.search("/" + rel):
                continue
            for h, rx in rules:
                if rx.search(rel):
                    break
            else:
                continue
            lang = src["lang"]
            if kind == "fortune":
                lang = pkg_lang(pkg)
            elif lang is None:
                lang = path_lang(rel, pkg_lang(pkg))
            elif kind in ("html", "mallard") and src["lang"] not in ("code", "math"):
                l = path_lang(rel, lang)
                if l != lang:
                    continue            # e.g. a translation we did not ask for
            if lang == "other":
                continue
            tasks.append((name, h, os.path.join(base, rel), rel, lang, opts))
    return tasks, used


def walk(base):
    out = []
    for d, dirs, files in os.walk(base, followlinks=False):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(d, f)
            if os.path.islink(p):
                continue
            if os.path.isfile(p):
                out.append(os.path.relpath(p, base))
    return out


def run_task(task):
    name, handler, path, rel, lang, opts = task
    try:
        docs = HANDLERS[handler](path, rel, lang, opts)
    except Exception as e:  # one bad file never stops a source
        return name, rel, [], "%s: %s: %s" % (rel, type(e).__name__, e)
    res = []
    for i, (g, l, text) in enumerate(docs):
        code = g == "code"
        if opts.get("langfilter") and l in ("de", "ru", "ja", "zh"):
            text = "\n".join(x for x in text.split("\n") if not english_line(x, l))
        t = clean(text, code=code)
        if t:
            res.append((g or opts.get("group"), l, i, t))
    return name, rel, res, None


# ---------------------------------------------------------------- boilerplate
def drop_boilerplate(docs):
    """Drop navigation/header/footer lines that repeat across the pages of one source.

    docs: [(folder, text)]. A line is a candidate if it is in >= max(8, min(30%, 300)) of the
    source's documents, or in >= half (at least 4) of the documents of its folder (one book).
    Candidates are removed only from the runs at the top and bottom of a page (blank lines
    included), so repeated headings and code lines inside a page stay."""
    n = len(docs)
    if n < 6:
        return [t for _, t in docs], 0
    df, ddf, nd = {}, {}, {}
    for folder, d in docs:
        nd[folder] = nd.get(folder, 0) + 1
        for l in set(x.strip() for x in d.split("\n")):
            if l:
                df[l] = df.get(l, 0) + 1
                k = (folder, l)
                ddf[k] = ddf.get(k, 0) + 1
    thr = max(8, min(0.3 * n, 300))
    bad = {l for l, c in df.items() if c >= thr}
    dbad = {k for k, c in ddf.items() if nd[k[0]] >= 6 and c >= max(4, 0.5 * nd[k[0]])}
    if not bad and not dbad:
        return [t for _, t in docs], 0
    out, dropped = [], 0
    for folder, d in docs:
        lines = d.split("\n")

        def boiler(x):
            xs = x.strip()
            return not xs or xs in bad or (folder, xs) in dbad
        i, j = 0, len(lines)
        while i < j and boiler(lines[i]):
            i += 1
        while j > i and boiler(lines[j - 1]):
            j -= 1
        dropped += sum(1 for x in lines[:i] + lines[j:] if x.strip())
        t = "\n".join(lines[i:j])
        if t.strip():
            out.append(t)
    return out, dropped


def source_key(src, used, root):
    debs = sorted(os.listdir(os.path.join(root, "downloads")))
    vers = [d for d in debs if any(d.startswith(p + "_") or d.startswith(p + "-") for p in src["packages"])]
    blob = json.dumps([VERSION, src, used, vers, KIND_RULES.get(src["kind"]), EXCLUDE.get(src["name"])],
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def finalize(src, results, root, key, used):
    """results: list of (rel, [(group, lang, idx, text)]) -> part files + DONE."""
    name = src["name"]
    buckets = {}
    for rel, docs in sorted(results, key=lambda r: r[0]):
        for g, l, i, t in docs:
            buckets.setdefault((g or src["group"], l), []).append((os.path.dirname(rel), t))
    pdir = os.path.join(root, "parts", name)
    tmp = pdir + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    counts = {}
    dropped = 0
    for (g, l), docs in sorted(buckets.items()):
        if src["kind"] in BOILERPLATE_KINDS:
            docs, d = drop_boilerplate(docs)
            dropped += d
        else:
            docs = [t for _, t in docs]
        data = "".join(d + SEP for d in docs).encode("utf-8")
        with open(os.path.join(tmp, "%s.%s.txt" % (g, l)), "wb") as f:
            f.write(data)
        counts["%s.%s" % (g, l)] = {"docs": len(docs), "bytes": len(data)}
    info = {"key": key, "source": name, "packages": used, "files": counts,
            "boilerplate_lines_dropped": dropped}
    with open(os.path.join(tmp, "DONE"), "w") as f:
        json.dump(info, f, indent=1)
    shutil.rmtree(pdir, ignore_errors=True)
    os.rename(tmp, pdir)
    return info


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-packages", default="")
    a = ap.parse_args()
    root = a.root
    skip = set(x for x in a.skip_packages.split(",") if x)
    os.makedirs(os.path.join(root, "parts"), exist_ok=True)
    t0 = time.time()

    def log(msg):
        print("[extract %4.0fs] %s" % (time.time() - t0, msg), file=sys.stderr, flush=True)

    srcs = S.sources(a.quick)
    plans, todo, failed_core, cached = {}, [], [], 0
    for src in srcs:
        tasks, used = plan_source(src, root, skip)
        key = source_key(src, used, root)
        done = os.path.join(root, "parts", src["name"], "DONE")
        if os.path.exists(done):
            try:
                with open(done) as f:
                    if json.load(f).get("key") == key:
                        cached += 1
                        continue
            except (OSError, ValueError):
                pass
        if not tasks:
            msg = "source %s: no input files (packages %s)" % (src["name"], src["packages"] or "-")
            if src["core"]:
                failed_core.append(msg)
            else:
                log("warning: optional " + msg + "; skipped")
            continue
        plans[src["name"]] = dict(src=src, key=key, used=used, left=len(tasks), results=[],
                                  errors=[], t=time.time())
        todo.extend(tasks)
    log("%d sources: %d cached, %d to extract (%d files, %d jobs)"
        % (len(srcs), cached, len(plans), len(todo), a.jobs))
    if failed_core:
        for m in failed_core:
            print("extract: FAILED core " + m, file=sys.stderr)
        return 1
    # Heavy sources first, and inside a source big files first, so that the pool is not left
    # waiting on one straggler at the end; whole sources finish one after another, so the
    # main process holds only a few sources' text at a time.
    def weight(t):
        try:
            return os.path.getsize(t[2]) * (20 if t[1] in ("pdf", "tex", "man", "pod") else 1)
        except OSError:
            return 0
    w = [weight(t) for t in todo]
    sw = {}
    for t, x in zip(todo, w):
        sw[t[0]] = sw.get(t[0], 0) + x
    order = sorted(range(len(todo)), key=lambda i: (-sw[todo[i][0]], todo[i][0], -w[i]))
    todo = [todo[i] for i in order]
    finished = 0
    if todo:
        ctx = mp.get_context("fork")
        with ctx.Pool(a.jobs) as pool:
            for name, rel, res, err in pool.imap_unordered(run_task, todo, chunksize=4):
                p = plans[name]
                p["left"] -= 1
                if err:
                    p["errors"].append(err)
                p["results"].append((rel, res))
                if p["left"] == 0:
                    src = p["src"]
                    try:
                        info = finalize(src, p["results"], root, p["key"], p["used"])
                    except Exception:
                        traceback.print_exc()
                        info = None
                    finished += 1
                    nerr = len(p["errors"])
                    if info is None or not info["files"]:
                        msg = "source %s produced no text" % name
                        if src["core"]:
                            failed_core.append(msg)
                        else:
                            log("warning: optional " + msg)
                    else:
                        nd = sum(v["docs"] for v in info["files"].values())
                        nb = sum(v["bytes"] for v in info["files"].values())
                        log("[%d/%d] %-24s %7d docs %8.1f MB %s%s(%.0fs)" % (
                            finished, len(plans), name, nd, nb / 1e6,
                            ",".join(sorted(info["files"])), " ",
                            time.time() - p["t"]))
                    if nerr:
                        log("  %s: %d files failed, e.g. %s" % (name, nerr, p["errors"][0]))
                    p["results"] = None
    if failed_core:
        for m in failed_core:
            print("extract: FAILED core " + m, file=sys.stderr)
        return 1
    log("extraction finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
