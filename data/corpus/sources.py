"""Source table of the multilingual corpus (see shared/CORPUS.md).

Every source names the Debian packages (or the npm package) it is read from,
the group it lands in (text/<group>.<lang>.txt), the extractor that turns the
unpacked files into documents, and whether it is core (the build fails if a
core source fails) or optional (warn and go on).

Run as `python3 sources.py packages [--quick]` to list "<pkg> <core|optional>"
lines for the download stage of build_corpus.sh.
"""
import sys

LANGS = ("en", "zh", "de", "ja", "ru", "code", "math")

NPM_PACKAGES = {"chinese-poetry": "2.0.1"}

# name: unique id of the source (part file name); kind: extractor in extract.py
SOURCES = [
    # ---- man pages -------------------------------------------------------
    dict(name="man-en", group="man", kind="man", lang="en", core=True,
         packages=["manpages", "manpages-dev"]),
    dict(name="man-de", group="man", kind="man", lang="de", core=True,
         packages=["manpages-de", "manpages-de-dev"]),
    dict(name="man-ru", group="man", kind="man", lang="ru", core=True,
         packages=["manpages-ru", "manpages-ru-dev"]),
    dict(name="man-ja", group="man", kind="man", lang="ja", core=True,
         packages=["manpages-ja", "manpages-ja-dev"]),
    dict(name="man-zh", group="man", kind="man", lang="zh", core=True,
         packages=["manpages-zh"]),
    # ---- LibreOffice help + UI strings ----------------------------------
    dict(name="office-help-en", group="office", kind="html", lang="en", core=False,
         packages=["libreoffice-help-en-us"]),
    dict(name="office-help-de", group="office", kind="html", lang="de", core=False,
         packages=["libreoffice-help-de"]),
    dict(name="office-help-ru", group="office", kind="html", lang="ru", core=False,
         packages=["libreoffice-help-ru"]),
    dict(name="office-help-ja", group="office", kind="html", lang="ja", core=False,
         packages=["libreoffice-help-ja"]),
    dict(name="office-help-zh", group="office", kind="html", lang="zh", core=False,
         packages=["libreoffice-help-zh-cn"]),
    dict(name="office-ui-de", group="office", kind="mo", lang="de", core=False,
         packages=["libreoffice-l10n-de"]),
    dict(name="office-ui-ru", group="office", kind="mo", lang="ru", core=False,
         packages=["libreoffice-l10n-ru"]),
    dict(name="office-ui-ja", group="office", kind="mo", lang="ja", core=False,
         packages=["libreoffice-l10n-ja"]),
    dict(name="office-ui-zh", group="office", kind="mo", lang="zh", core=False,
         packages=["libreoffice-l10n-zh-cn"]),
    # ---- Debian manuals (HTML; language from the path or the package) ----
    dict(name="debian-handbook", group="manuals", kind="html", lang=None, core=False,
         packages=["debian-handbook"]),
    dict(name="installation-guide", group="manuals", kind="html", lang=None, core=False,
         packages=["installation-guide-amd64"]),
    dict(name="debian-reference-en", group="manuals", kind="html", lang="en", core=False,
         packages=["debian-reference-en"]),
    dict(name="debian-reference-de", group="manuals", kind="html", lang="de", core=False,
         packages=["debian-reference-de"]),
    dict(name="debian-reference-ja", group="manuals", kind="html", lang="ja", core=False,
         packages=["debian-reference-ja"]),
    dict(name="debian-reference-zh-cn", group="manuals", kind="html", lang="zh", core=False,
         packages=["debian-reference-zh-cn"]),
    dict(name="debian-reference-zh-tw", group="manuals", kind="html", lang="zh", core=False,
         packages=["debian-reference-zh-tw"]),
    dict(name="developers-reference", group="manuals", kind="html", lang="en", core=False,
         packages=["developers-reference"]),
    dict(name="developers-reference-de", group="manuals", kind="html", lang="de", core=False,
         packages=["developers-reference-de"]),
    dict(name="developers-reference-ja", group="manuals", kind="html", lang="ja", core=False,
         packages=["developers-reference-ja"]),
    dict(name="developers-reference-ru", group="manuals", kind="html", lang="ru", core=False,
         packages=["developers-reference-ru"]),
    dict(name="maint-guide", group="manuals", kind="html", lang=None, core=False,
         packages=["maint-guide", "maint-guide-de", "maint-guide-ja", "maint-guide-ru",
                   "maint-guide-zh-cn", "maint-guide-zh-tw"]),
    dict(name="debian-faq", group="manuals", kind="html", lang=None, core=False,
         packages=["debian-faq", "debian-faq-de", "debian-faq-ja", "debian-faq-ru",
                   "debian-faq-zh-cn"]),
    dict(name="debian-edu-doc", group="manuals", kind="html", lang=None, core=False,
         packages=["debian-edu-doc-en", "debian-edu-doc-de", "debian-edu-doc-ja",
                   "debian-edu-doc-zh-cn"]),
    dict(name="debian-policy", group="manuals", kind="html", lang=None, core=False,
         packages=["debian-policy", "debian-policy-ja"]),
    dict(name="aptitude-doc", group="manuals", kind="html", lang=None, core=False,
         packages=["aptitude-doc-en", "aptitude-doc-ja", "aptitude-doc-ru"]),
    dict(name="debian-history", group="manuals", kind="html", lang=None, core=False,
         packages=["debian-history"]),
    dict(name="harden-doc", group="manuals", kind="html", lang=None, core=False,
         packages=["harden-doc"]),
    # ---- other manuals ---------------------------------------------------
    dict(name="gnome-user-docs", group="guides", kind="mallard", lang=None, core=False,
         packages=["gnome-user-docs"]),
    dict(name="gnome-devel-docs", group="guides", kind="mallard", lang=None, core=False,
         packages=["gnome-devel-docs"]),
    dict(name="lilypond-doc", group="guides", kind="html", lang=None, core=False,
         packages=["lilypond-doc-html", "lilypond-doc-html-de", "lilypond-doc-html-ja",
                   "lilypond-doc-html-zh"]),
    dict(name="groonga-doc", group="guides", kind="html", lang=None, core=False,
         packages=["groonga-doc"]),
    # ---- package descriptions (apt Translation-xx files) -----------------
    dict(name="descriptions", group="descriptions", kind="descriptions", lang=None, core=True,
         packages=[]),
    # ---- dictionaries ----------------------------------------------------
    dict(name="dict-gcide", group="dictionaries", kind="dictd", lang="en", core=True,
         packages=["dict-gcide"]),
    dict(name="dict-wn", group="dictionaries", kind="dictd", lang="en", core=True,
         packages=["dict-wn"]),
    dict(name="dict-foldoc", group="dictionaries", kind="dictd", lang="en", core=False,
         packages=["dict-foldoc"]),
    dict(name="dict-jargon", group="dictionaries", kind="dictd", lang="en", core=False,
         packages=["dict-jargon"]),
    dict(name="trans-de-en", group="dictionaries", kind="plaindict", lang="de", core=False,
         packages=["trans-de-en"]),
    dict(name="edict", group="dictionaries", kind="plaindict", lang="ja", core=False,
         packages=["edict"]),
    # ---- quotes ----------------------------------------------------------
    dict(name="fortunes", group="quotes", kind="fortune", lang=None, core=True,
         packages=["fortunes", "fortunes-min", "fortunes-de", "fortunes-ru", "fortunes-zh"]),
    # ---- TeX manuals -----------------------------------------------------
    dict(name="tex-zh", group="tex", kind="tex", lang="zh", core=False,
         packages=["texlive-lang-chinese"]),
    dict(name="tex-ja", group="tex", kind="tex", lang="ja", core=False,
         packages=["texlive-lang-japanese"]),
    dict(name="tex-ru", group="tex", kind="tex", lang="ru", core=False,
         packages=["texlive-lang-cyrillic"]),
    dict(name="tex-de", group="tex", kind="tex", lang="de", core=False,
         packages=["texlive-lang-german"]),
    # ---- code ------------------------------------------------------------
    dict(name="code-linux", group="code", kind="linux", lang="code", core=True,
         packages=["linux-source-6.1"]),
    dict(name="code-go", group="code", kind="code", lang="code", core=True,
         packages=["golang-1.19-src"]),
    dict(name="code-rust", group="code", kind="code", lang="code", core=True,
         packages=["rust-src"]),
    dict(name="code-perl", group="code", kind="code", lang="code", core=False,
         packages=["perl-modules-5.36"]),
    dict(name="code-python", group="code", kind="code", lang="code", core=False,
         packages=["libpython3.11-stdlib"]),
    # ---- English docs ----------------------------------------------------
    dict(name="docs-python", group="docs", kind="rst", lang="en", core=True,
         packages=["python3.11-doc"]),
    dict(name="docs-perl", group="docs", kind="pod", lang="en", core=False,
         packages=["perl-doc"]),
    dict(name="docs-cppreference", group="docs", kind="html", lang="en", core=False,
         packages=["cppreference-doc-en-html"]),
    # ---- math ------------------------------------------------------------
    dict(name="math-sympy", group="math", kind="math", lang="math", core=False,
         packages=["python-sympy-doc"]),
    dict(name="math-maxima", group="math", kind="math", lang="math", core=False,
         packages=["maxima-doc"]),
    dict(name="math-gap", group="math", kind="math", lang="math", core=False,
         packages=["gap-doc"]),
    dict(name="math-pari", group="math", kind="math", lang="math", core=False,
         packages=["pari-doc"]),
    # ---- classical Chinese (npm) ----------------------------------------
    dict(name="poetry", group="poetry", kind="poetry", lang="zh", core=True,
         packages=[], npm=["chinese-poetry"]),
]

QUICK_SOURCES = [
    dict(name="man-en", group="man", kind="man", lang="en", core=True,
         packages=["manpages"]),
    dict(name="man-ru", group="man", kind="man", lang="ru", core=True,
         packages=["manpages-ru"]),
    dict(name="fortunes", group="quotes", kind="fortune", lang=None, core=True,
         packages=["fortunes-min"]),
]


def sources(quick=False):
    return QUICK_SOURCES if quick else SOURCES


def packages(quick=False):
    """[(pkg, core)] in table order, each package once."""
    seen = {}
    for s in sources(quick):
        for p in s["packages"]:
            seen[p] = seen.get(p, False) or s["core"]
    return list(seen.items())


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    if len(sys.argv) > 1 and sys.argv[1] == "packages":
        for p, core in packages(quick):
            print(p, "core" if core else "optional")
    elif len(sys.argv) > 1 and sys.argv[1] == "npm":
        if not quick:
            for p, v in NPM_PACKAGES.items():
                print("%s@%s" % (p, v))
    else:
        sys.exit("usage: sources.py packages|npm [--quick]")
